"""The Ascend LayerNorm kernels (cpp/ascend/layer_norm_kernels.asc): forward
(AscendC::LayerNorm), LayerNormGrad alone, and the fused LayerNormGrad ->
LayerNormGradBeta backward, run on the CPU emulation of CANN's dav-2201 and
dav-2002 implementations, against float64 references and the CPU kernels;
their lowerings through XLA with the emulated handlers; and the exported
training step for the Ascend platform."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import run_python

from jax_lngb._ops.layer_norm.backward import layer_norm_backward_ref
from jax_lngb._ops.layer_norm.forward import layer_norm_forward_ref
from jax_lngb._ops.layer_norm.grad import layer_norm_grad_ref
from jax_lngb._ops.primitives import layer_norm_backward_p, layer_norm_forward_p, layer_norm_grad_p
from jax_lngb.ascend import emulator
from jax_lngb.ascend import layer_norm_kernels as K

ARCHS = ["dav-2201", "dav-2002"]
EPS = 1e-5
# Relative bounds of a float32 computation against float64, and of one
# rounding to half on top of it.
TOL = {np.float32: 2e-5, np.float16: 2e-3}


def _data(rows, h, dt, seed=0, offset=3.0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, h)) * 2 + offset).astype(dt)
    dy = rng.standard_normal((rows, h)).astype(dt)
    g = rng.standard_normal(h).astype(np.float32)
    b = rng.standard_normal(h).astype(np.float32)
    return x, dy, g, b


def _rel(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return np.abs(a - ref).max() / max(np.abs(ref).max(), 1e-30)


def _cpu_forward(x, g, b):
    return [
        np.asarray(o)
        for o in layer_norm_forward_p.bind(
            jnp.asarray(x), jnp.asarray(g), jnp.asarray(b), epsilon=EPS, batch_dims=0, backward="fused"
        )
    ]


# (rows, H): aligned H, padded H (float: H % 8 != 0, half: H % 16 != 0),
# several tiles with a short last one, H = 1024 (one row per LayerNormGrad call).
SHAPES = [(37, 64), (19, 20), (300, 100), (5, 1024)]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("rows, h", SHAPES)
def test_forward_matches_float64_and_the_cpu_kernel(arch, dt, rows, h):
    x, _, g, b = _data(rows, h, dt)
    y, mean, var, stats = K.run_forward(x, g, b, epsilon=EPS, npu_arch=arch)
    yr, mr, vr = layer_norm_forward_ref(x, g, b, epsilon=EPS)
    assert y.dtype == dt and mean.dtype == np.float32 and var.dtype == np.float32
    assert _rel(y, yr) < TOL[dt]
    # Statistics are float32 even for half inputs (computed on float32 copies).
    assert _rel(mean, mr) < 2e-6 and _rel(var, vr) < 2e-5
    cy, cm, cv = _cpu_forward(x, g, b)
    assert _rel(y, cy) < TOL[dt] and _rel(mean, cm) < 2e-6 and _rel(var, cv) < 2e-5
    plan = stats["plan"]
    assert stats["ub_peak_bytes"] == plan.ub_bytes_used  # the plan mirrors the kernel's buffers
    assert stats["api_calls"] == plan.num_tiles * (2 if plan.original_h_length != plan.h_length else 1)


def test_padded_columns_do_not_bias_the_variance():
    # A row far from zero: zero padding alone would add (H - H0)/H0 * mean^2
    # to the variance (about 2.5e5 here); the kernel centres the tile first.
    x, _, g, b = _data(16, 20, np.float32, offset=1000.0)
    _, mean, var, stats = K.run_forward(x, g, b, epsilon=EPS)
    assert stats["plan"].h_length == 24
    _, mr, vr = layer_norm_forward_ref(x, g, b, epsilon=EPS)
    assert np.abs(var - vr).max() < 1e-3 * vr.max()
    assert _rel(mean, mr) < 1e-6


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt, out_dt", [(np.float32, np.float32), (np.float16, np.float16), (np.float16, np.float32)])
@pytest.mark.parametrize("rows, h", SHAPES)
def test_fused_backward_matches_float64_and_the_cpu_kernel(arch, dt, out_dt, rows, h):
    x, dy, g, _ = _data(rows, h, dt, seed=1)
    _, mr, vr = layer_norm_forward_ref(x, g, g, epsilon=EPS)
    mean, var = mr.astype(np.float32), vr.astype(np.float32)
    dx, pg, pb, stats = K.run_backward(dy, x, var, mean, g, fused=True, out_dtype=out_dt, epsilon=EPS, npu_arch=arch)
    dxr, pgr, pbr = layer_norm_backward_ref(dy, x, var, mean, g, epsilon=EPS)
    assert dx.dtype == dt and pg.dtype == out_dt and pb.dtype == out_dt
    assert _rel(dx, dxr) < TOL[dt]
    assert _rel(pg, pgr) < TOL[out_dt] and _rel(pb, pbr) < TOL[out_dt]
    cdx, cpg, cpb = (
        np.asarray(o)
        for o in layer_norm_backward_p.bind(
            jnp.asarray(dy),
            jnp.asarray(x),
            jnp.asarray(var),
            jnp.asarray(mean),
            jnp.asarray(g),
            epsilon=EPS,
            batch_dims=0,
            out_dtype=jnp.dtype(out_dt),
        )
    )
    assert _rel(dx, cdx) < TOL[dt] and _rel(pg, cpg) < TOL[out_dt] and _rel(pb, cpb) < TOL[out_dt]
    plan = stats["plan"]
    assert stats["api_calls"] == 2 * plan.num_tiles  # LayerNormGrad and LayerNormGradBeta per tile


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("rows, h", [(37, 64), (19, 20), (5, 1024)])
def test_layer_norm_grad_matches_float64_and_the_cpu_kernel(arch, dt, rows, h):
    x, dy, g, _ = _data(rows, h, dt, seed=2)
    _, mr, vr = layer_norm_forward_ref(x, g, g, epsilon=EPS)
    mean, var = mr.astype(np.float32), vr.astype(np.float32)
    pdx, res, _ = K.run_backward(dy, x, var, mean, g, fused=False, epsilon=EPS, npu_arch=arch)
    pdxr, resr = layer_norm_grad_ref(dy, x, var, mean, g, epsilon=EPS)
    assert pdx.dtype == dt and res.dtype == dt
    assert _rel(pdx, pdxr) < TOL[dt] and _rel(res, resr) < TOL[dt]
    cpdx, cres = (
        np.asarray(o)
        for o in layer_norm_grad_p.bind(
            jnp.asarray(dy),
            jnp.asarray(x),
            jnp.asarray(var),
            jnp.asarray(mean),
            jnp.asarray(g),
            epsilon=EPS,
            batch_dims=0,
        )
    )
    assert _rel(pdx, cpdx) < TOL[dt] and _rel(res, cres) < TOL[dt]


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_bits_do_not_depend_on_the_core_count(dt):
    x, dy, g, b = _data(700, 40, dt, seed=4)
    _, mr, vr = layer_norm_forward_ref(x, g, b, epsilon=EPS)
    mean, var = mr.astype(np.float32), vr.astype(np.float32)
    outs = []
    for cores, rev in [(1, False), (3, False), (40, False), (40, True)]:
        fwd = K.run_forward(x, g, b, epsilon=EPS, num_cores=cores, reverse_core_order=rev)
        bwd = K.run_backward(dy, x, var, mean, g, fused=True, epsilon=EPS, num_cores=cores, reverse_core_order=rev)
        grad = K.run_backward(dy, x, var, mean, g, fused=False, epsilon=EPS, num_cores=cores, reverse_core_order=rev)
        assert bwd[3]["plan"].num_tiles > 3 and bwd[3]["block_dim"] == min(cores, bwd[3]["plan"].num_groups)
        outs.append([a.tobytes() for a in (*fwd[:3], *bwd[:3], *grad[:2])])
    assert all(o == outs[0] for o in outs[1:])


def test_plans_fit_the_unified_buffer_and_keep_the_statistics_layout():
    for kind in ("forward", "grad", "backward"):
        for h, dt in [(1024, np.float32), (1024, np.float16), (24, np.float32), (4096, np.float16)]:
            if kind == "forward":
                p = K.plan_forward(4096, h, dtype=dt)
            else:
                try:
                    p = K.plan_backward(4096, h, fused=kind == "backward", dtype=dt)
                except ValueError as e:
                    # LayerNormGrad keeps eight rows of float32 temporaries.
                    assert h == 4096 and "cannot hold one row" in str(e)
                    continue
            assert p.ub_bytes_used <= 196608 and p.stat_stride % 8 == 0 and p.stat_stride >= p.tile_rows
            assert p.num_tiles * p.tile_rows >= p.rows > (p.num_tiles - 1) * p.tile_rows
    p = K.plan_forward(21, 8, dtype=np.float32, ub_bytes=4096)
    v = np.arange(21, dtype=np.float32)
    t = K.stats_to_tiles(v, p)
    assert t.shape == (p.stat_elems,) and np.array_equal(K.stats_from_tiles(t, p), v)
    # dav-3510 is planned (and type-checked) but not emulated.
    p3 = K.plan_backward(64, 64, fused=True, npu_arch="dav-3510")
    assert p3.api_tile.one_cal_size == 1 and p3.gb_tile.bs_length <= 65535
    x, dy, g, b = _data(8, 64, np.float32)
    with pytest.raises(emulator.KernelFault, match="dav-3510 implementation .* is not emulated"):
        K.run_forward(x, g, b, npu_arch="dav-3510")
    with pytest.raises(TypeError, match="dtype must be float32 or float16"):
        K.plan_forward(8, 64, dtype=np.float64)


# ----------------------------------------------------- through XLA and export

E2E = r"""
import json
import numpy as np, jax, jax.numpy as jnp
from jax.interpreters import mlir
import jax_lngb
from jax_lngb import _ascend_emu
from jax_lngb.ascend import lowering
from jax_lngb._ops import primitives as P
# The Ascend FFI targets bound on the CPU to the emulated launchers, and the
# LayerNorm primitives lowered there with the Ascend rules: lowering ->
# custom call -> handler -> kernels, all through XLA.
for name, capsule in _ascend_emu.layer_norm_registrations().items():
    jax.ffi.register_ffi_target(name, capsule, platform="cpu")
rules = dict(lowering._LAYER_NORM_LOWERINGS)
def done(**out):
    print("RESULT " + json.dumps(out))
"""


def _child(code, env=None):
    proc = run_python(E2E + code, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    import json

    return json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1][7:])


@pytest.mark.parametrize("backward", ["fused", "chained"])
def test_vjp_runs_the_emulated_kernels_through_xla(backward):
    out = _child(
        r"""
import re
backward = BACKWARD
rng = np.random.default_rng(5)
def step(x, g, b, ct):
    y, back = jax.vjp(lambda x, g, b: jax_lngb.layer_norm(x, g, b, backward=backward), x, g, b)
    return (y, *back(ct))
cases = {}
for dt, shape in [(np.float32, (3, 50, 20)), (np.float16, (2, 40, 64))]:
    args = (jnp.asarray(rng.standard_normal(shape) * 2 + 1, dt),
            jnp.asarray(rng.standard_normal(shape[-1]), jnp.float32),
            jnp.asarray(rng.standard_normal(shape[-1]), jnp.float32),
            jnp.asarray(rng.standard_normal(shape), dt))
    cases[dt.__name__] = (args, jax.jit(step)(*args))  # the CPU kernels
for prim, rule in rules.items():
    mlir.register_lowering(prim, rule, platform="cpu")
jax.clear_caches()
res = {}
for name, (args, cpu) in cases.items():
    f = jax.jit(step)
    text = f.lower(*args).as_text()
    asc = f(*args)
    res[name] = dict(
        targets=sorted(set(re.findall(r"custom_call @(\w+)", text))),
        rel=[float(np.abs(np.asarray(a, np.float64) - np.asarray(c, np.float64)).max()
                   / np.abs(np.asarray(c, np.float64)).max()) for a, c in zip(asc, cpu)],
        dtypes=[str(a.dtype) for a in asc])
# vmap with shared parameters folds the mapped axis into the rows: the
# kernels still run (the local primitives see batch_dims = 0).
x, g, b, _ = cases["float32"][0]
vtext = jax.jit(jax.vmap(lambda x: jax_lngb.layer_norm(x, g, b))).lower(x).as_text()
res["vmap"] = sorted(set(re.findall(r"custom_call @(\w+)", vtext)))
done(**res)
""".replace("BACKWARD", repr(backward))
    )
    want = {"jax_lngb_ascend_layer_norm_forward"}
    want |= (
        {"jax_lngb_ascend_layer_norm_backward"}
        if backward == "fused"
        else {"jax_lngb_ascend_layer_norm_grad", "jax_lngb_layer_norm_grad_beta"}
    )
    assert "jax_lngb_ascend_layer_norm_forward" in out.pop("vmap")
    for dt, r in out.items():
        assert want <= set(r["targets"]), r
        assert not {"jax_lngb_layer_norm_forward", "jax_lngb_layer_norm_backward"} & set(r["targets"]), r
        assert r["dtypes"] == [dt, dt, "float32", "float32"]
        tol = 2e-5 if dt == "float32" else 2e-3
        assert max(r["rel"]) < tol, r


EXPORT = r"""
import json, re
import numpy as np, jax, jax.numpy as jnp
import jax_lngb
jax_lngb.ascend.register_platform("ascend")
res = {}
for dt in (jnp.float32, jnp.float16):
    def step(x, gamma, beta, ct):
        y, back = jax.vjp(jax_lngb.layer_norm, x, gamma, beta)
        return (y, *back(ct))
    specs = (jax.ShapeDtypeStruct((4096, 1024), dt), jax.ShapeDtypeStruct((1024,), jnp.float32),
             jax.ShapeDtypeStruct((1024,), jnp.float32), jax.ShapeDtypeStruct((4096, 1024), dt))
    exp = jax_lngb.export.export(jax.jit(step), platforms=["ascend"])(*specs)
    text = exp.mlir_module()
    calls = re.findall(r"stablehlo\.custom_call @(\w+)", text)
    res[jnp.dtype(dt).name] = dict(calls=calls, n_reduce=text.count("stablehlo.reduce"))
print("RESULT " + json.dumps(res))
"""


def test_exported_training_step_holds_only_the_ascendc_calls():
    proc = run_python(EXPORT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    import json

    out = json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1][7:])
    for dt in ("float32", "float16"):
        r = out[dt]
        assert sorted(r["calls"]) == ["jax_lngb_ascend_layer_norm_backward", "jax_lngb_ascend_layer_norm_forward"], r
        # No jax.numpy row reduction: nothing reduces at all.
        assert r["n_reduce"] == 0, r


EXPORT_FORMS = r"""
import json, re
import jax, jax.numpy as jnp
import jax_lngb
jax_lngb.ascend.register_platform("ascend")
res = {}
forms = {
    "zero_centered": lambda x, g: jax_lngb.layer_norm(x, g, g, zero_centered_gamma=True),
    "no_beta": lambda x, g: jax_lngb.layer_norm(x, g, None),
    "rms_zero_centered": lambda x, g: jax_lngb.rms_norm(x, g, zero_centered_gamma=True),
}
for name, f in forms.items():
    def step(x, gamma, ct):
        y, back = jax.vjp(f, x, gamma)
        return (y, *back(ct))
    specs = (jax.ShapeDtypeStruct((256, 512), jnp.float32), jax.ShapeDtypeStruct((512,), jnp.float32),
             jax.ShapeDtypeStruct((256, 512), jnp.float32))
    text = jax_lngb.export.export(jax.jit(step), platforms=["ascend"])(*specs).mlir_module()
    res[name] = sorted(set(re.findall(r"stablehlo\.custom_call @(\w+)", text)))
print("RESULT " + json.dumps(res))
"""


def test_zero_centered_and_bias_free_forms_lower_to_the_ascendc_kernels():
    # 1 + gamma is formed in float32 before the kernel (as on the CPU); a
    # missing beta becomes an [H] zero for AscendC::LayerNorm and its
    # pd_beta is dropped: the steps still hold the AscendC calls.
    import json

    proc = run_python(EXPORT_FORMS)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    ln_calls = ["jax_lngb_ascend_layer_norm_backward", "jax_lngb_ascend_layer_norm_forward"]
    assert out["zero_centered"] == ln_calls and out["no_beta"] == ln_calls, out
    assert out["rms_zero_centered"] == ["jax_lngb_ascend_rms_norm_backward", "jax_lngb_ascend_rms_norm_forward"], out
