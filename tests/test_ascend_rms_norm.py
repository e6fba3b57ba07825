"""RMSNorm on Ascend: the AscendC forward and backward kernels
(cpp/ascend/rms_norm_kernel.asc) and their lowerings.

The kernels run on the CPU emulation of AscendC: the Ascend FFI targets are
bound on the CPU to the emulated launchers and the Ascend lowering rules are
registered for the CPU platform, so lowering -> custom call -> handler ->
kernels all run through XLA. That replaces the CPU rules of the process, so
those tests run in child interpreters; each first computes the CPU kernels'
results with the ordinary rules, then the Ascend ones. The emulation runs
CANN's dav-2201 and dav-2002 implementations of RmsNorm and Sum (dav-3510's
are not emulated; for dav-3510 the plans are checked and the export
carries the kernels). Last, the exported training step for a stand-in
`ascend` platform holds only AscendC custom calls for the norm.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import run_python

from jax_lngb import ascend

PRELUDE = r"""
import json, os, re
import numpy as np, jax, jax.numpy as jnp
import jax_lngb
from jax_lngb._ops.primitives import rms_norm_forward_p

EPS = 1e-5

def fwd(x, g):
    return rms_norm_forward_p.bind(x, g, epsilon=EPS, batch_dims=0, backward="fused")

def vjp(x, g, ct):
    y, back = jax.vjp(lambda a, b: jax_lngb.rms_norm(a, b, epsilon=EPS), x, g)
    return (y, *back(ct))

def done(**out):
    print("RESULT " + json.dumps(out))
"""

# After the CPU results: the Ascend rules and the emulated handlers for "cpu".
TO_ASCEND = r"""
from jax_lngb import _ascend_emu
from jax_lngb.ascend import lowering as ascend_lowering
for name, capsule in _ascend_emu.registrations().items():
    jax.ffi.register_ffi_target(name, capsule, platform="cpu")
ascend_lowering._register_rms_norm("cpu")
jax.clear_caches()

def on_cores(n, fn, *args):
    # The core count is read at trace time: a fresh trace per count.
    os.environ["JAX_LNGB_ASCEND_NUM_CORES"] = str(n)
    jax.clear_caches()
    return [np.asarray(v) for v in jax.jit(fn)(*args)]
"""


def child(code: str, env: dict | None = None) -> dict:
    proc = run_python(PRELUDE + code, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def ref64(x, g, dy, eps=1e-5):
    """float64 forward and backward: y, rstd, dx, dgamma."""
    x = np.asarray(x, np.float64)
    g = np.asarray(g, np.float64)
    dy = np.asarray(dy, np.float64)
    rstd = 1.0 / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps)
    xhat = x * rstd
    gd = dy * g
    dx = rstd * (gd - xhat * np.mean(gd * xhat, -1, keepdims=True))
    dgamma = (dy * xhat).reshape(-1, x.shape[-1]).sum(0)
    return xhat * g, rstd[..., 0], dx, dgamma


# ------------------------------------------------------------------ plans


@pytest.mark.parametrize("arch", ["dav-2201", "dav-2002", "dav-3510"])
def test_plans_fit_the_unified_buffer_and_cover_every_row(monkeypatch, arch):
    monkeypatch.setenv(ascend.ARCH_ENV, arch)
    ub = ascend.tiling.npu_arch_defaults(arch).ub_bytes
    for shape, dt in [
        ((4096, 1024), np.float32),
        ((4096, 1024), np.float16),
        ((3, 70, 20), np.float16),
        ((7, 4000), np.float32),
        ((1000, 2), np.float32),
    ]:
        for backward in (False, True):
            p = ascend.plan_rms_norm(shape, dt, backward=backward, out_dtype=dt)
            assert p is not None, (shape, dt, backward)
            rows = int(np.prod(shape[:-1]))
            assert p.ub_bytes_used <= ub and 1 <= p.tile_rows <= 255
            assert p.num_tiles == -(-rows // p.tile_rows) and p.rows == rows
            assert p.rstd_stride % 8 == 0 and p.rstd_stride >= p.tile_rows
            assert p.h % (32 // np.dtype(dt).itemsize) == 0 and p.original_h == shape[-1]
            words = p.to_array()
            assert len(words) == (64 if backward else 40)
            if backward:
                # the combine kernel reads the first 56 words: rows, h, tile_rows, num_tiles
                assert list(words[:4]) == [rows, p.h, p.tile_rows, p.num_tiles]
                assert p.workspace_bytes == p.num_groups * 2 * p.h * 4 and 1 <= p.num_groups <= 240
                assert p.combine_block_dim * p.combine_cols_per_core >= p.h


def test_plans_fall_back_where_the_kernels_cannot_go(monkeypatch):
    monkeypatch.delenv(ascend.ARCH_ENV, raising=False)
    import ml_dtypes

    assert ascend.plan_rms_norm((8, 64), ml_dtypes.bfloat16, backward=False) is None  # no bfloat16 kernel
    assert ascend.plan_rms_norm((8, 1), np.float32, backward=False) is None  # RmsNorm needs two columns
    assert ascend.plan_rms_norm((0, 64), np.float32, backward=False) is None
    assert ascend.plan_rms_norm((2, 40000), np.float32, backward=True) is None  # one row exceeds the UB
    assert ascend.plan_rms_norm((8, 64), np.float32, backward=True, out_dtype=ml_dtypes.bfloat16) is None
    # the forward fits a wider row than the backward: never a plan that overflows
    p = ascend.plan_rms_norm((2, 8192), np.float32, backward=False)
    assert p is not None and p.ub_bytes_used <= ascend.DEFAULT_UB_BYTES
    with pytest.raises(ValueError, match="JAX_LNGB_ASCEND_NUM_CORES must be an integer"):
        monkeypatch.setenv(ascend.NUM_CORES_ENV, "x")
        ascend.plan_rms_norm((8, 64), np.float32, backward=False)


# ------------------------------------------------- emulated kernels via XLA


CASES = r"""
rng = np.random.default_rng(11)
CASES = [((3, 70, 20), np.float32, np.float32), ((300, 1024), np.float32, np.float32),
         ((2, 300, 40), np.float16, np.float16), ((97, 256), np.float16, np.float32)]
cpu, data = {}, {}
for shape, dt, gdt in CASES:
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dt)
    g = (1 + 0.5 * rng.standard_normal(shape[-1:])).astype(gdt)
    ct = rng.standard_normal(shape).astype(dt)
    data[shape] = (x, g, ct)
    y, rstd = jax.jit(fwd)(x, g)
    cpu[shape] = [np.asarray(v) for v in (y, rstd, *jax.jit(vjp)(x, g, ct)[1:])]
"""


@pytest.mark.parametrize("arch", ["dav-2201", "dav-2002"])
def test_kernels_match_float64_and_the_cpu_kernels_with_the_same_bits_on_any_core_count(arch):
    out = child(
        CASES
        + TO_ASCEND
        + r"""
from jax_lngb.ascend import lowering as L
res = {}
for shape, dt, gdt in CASES:
    x, g, ct = data[shape]
    text = jax.jit(vjp).lower(x, g, ct).as_text()
    runs = {n: on_cores(n, lambda a, b, c: (*fwd(a, b), *vjp(a, b, c)[1:]), x, g, ct) for n in (1, 3, 40)}
    y, rstd, dx, dg = runs[40]
    same = all(all(np.array_equal(u, v) for u, v in zip(runs[40], runs[n])) for n in (1, 3))
    res[str(shape)] = dict(
        calls=sorted({c for c in re.findall(r"custom_call @(\w+)", text) if c.startswith("jax_lngb")}),
        same=bool(same),
        dtypes=[str(v.dtype) for v in (y, rstd, dx, dg)],
        y=y.astype(np.float64).tolist(), rstd=rstd.tolist(), dx=dx.astype(np.float64).tolist(),
        dg=dg.astype(np.float64).tolist(),
        cpu=[v.astype(np.float64).tolist() for v in cpu[shape]],
        x=x.astype(np.float64).tolist(), g=g.astype(np.float64).tolist(), ct=ct.astype(np.float64).tolist())
done(**res)
""",
        env={"JAX_LNGB_ASCEND_ARCH": arch},
    )
    for key, r in out.items():
        f16 = "float16" in r["dtypes"][0]
        assert r["calls"] == ["jax_lngb_ascend_rms_norm_backward", "jax_lngb_ascend_rms_norm_forward"], r["calls"]
        assert r["same"], f"{key}: bits depend on the core count"
        x, g, ct = (np.asarray(r[k]) for k in ("x", "g", "ct"))
        want = ref64(x, g, ct)
        got = [np.asarray(r[k]) for k in ("y", "rstd", "dx", "dg")]
        assert r["dtypes"][1] == "float32"
        for name, a, w, c in zip(("y", "rstd", "dx", "dgamma"), got, want, r["cpu"]):
            scale = np.abs(w).max()
            # float16 results are rounded to half once (half an ulp: 2^-11 relative)
            tol = (2e-3 if f16 and name in ("y", "dx") else 1e-5) + (1e-3 if f16 and name == "dgamma" else 0)
            assert np.abs(a - w).max() <= tol * scale, (key, name, np.abs(a - w).max() / scale)
            c = np.asarray(c)
            assert np.abs(a - c).max() <= tol * scale, (key, name, "vs CPU", np.abs(a - c).max() / scale)


def test_vmap_with_shared_gamma_folds_into_rows_and_runs_the_kernels():
    # The Equinox pattern: the model is vmapped over examples with gamma
    # shared, the gradient taken outside; the mapped axis joins the rows.
    out = child(
        TO_ASCEND
        + r"""
rng = np.random.default_rng(5)
x = rng.standard_normal((2, 3, 40, 24)).astype(np.float32)
ct = rng.standard_normal(x.shape).astype(np.float32)
g = (1 + 0.5 * rng.standard_normal(24)).astype(np.float32)
def loss(g, x, ct):
    y = jax.vmap(lambda a: jax_lngb.rms_norm(a, g, epsilon=EPS))(x)
    return jnp.sum(y * ct), y
step = jax.grad(loss, argnums=(0, 1), has_aux=True)
text = jax.jit(step).lower(g, x, ct).as_text()
(dg, dx), y = [[np.asarray(v) for v in t] if isinstance(t, tuple) else np.asarray(t) for t in jax.jit(step)(g, x, ct)]
done(calls=sorted({c for c in re.findall(r"custom_call @(\w+)", text) if c.startswith("jax_lngb")}),
     y=y.tolist(), dx=dx.tolist(), dg=dg.tolist(), x=x.tolist(), g=g.tolist(), ct=ct.tolist())
"""
    )
    assert out["calls"] == ["jax_lngb_ascend_rms_norm_backward", "jax_lngb_ascend_rms_norm_forward"], out["calls"]
    x, g, ct = (np.asarray(out[k]) for k in ("x", "g", "ct"))
    y, _, dx, dg = ref64(x, g, ct)
    for name, want in (("y", y), ("dx", dx), ("dg", dg)):
        got = np.asarray(out[name])
        assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5 * np.abs(want).max(), name


def test_handlers_reject_calls_that_break_the_contract():
    out = child(
        TO_ASCEND
        + r"""
from jax_lngb.ascend import lowering as L
x = np.ones((4, 16), np.float32)
g = np.ones((16,), np.float32)
p = L.plan_rms_norm(x.shape, x.dtype, backward=False, epsilon=EPS)
outs = (jax.ShapeDtypeStruct((4, 16), jnp.float32), jax.ShapeDtypeStruct((p.num_tiles * p.rstd_stride,), jnp.float32))
call = jax.ffi.ffi_call(L.RMS_NORM_FORWARD_TARGET, outs)
ok = call(x, g, p.to_array(), **p.attrs())
errors = {}
for name, change in [("rows", dict(rows=np.uint32(5))), ("h", dict(h_length=np.uint32(8))),
                     ("h0", dict(original_h_length=np.uint32(1))), ("cores", dict(block_dim=np.uint32(9)))]:
    try:
        jax.block_until_ready(call(x, g, p.to_array(), **{**p.attrs(), **change}))
        errors[name] = None
    except Exception as e:
        errors[name] = f"{type(e).__name__}: {e}"
try:
    jax.block_until_ready(call(x, g, p.to_array()[:30], **p.attrs()))
except Exception as e:
    errors["tiling"] = f"{type(e).__name__}: {e}"
done(y=np.asarray(ok[0]).tolist(), rstd=np.asarray(ok[1])[:4].tolist(), errors=errors)
"""
    )
    r = 1 / np.sqrt(1 + 1e-5)  # x = gamma = 1
    assert np.allclose(out["y"], r, rtol=1e-6) and np.allclose(out["rstd"], r, rtol=1e-6)
    e = out["errors"]
    assert "must hold rows * h_length = 80 elements" in e["rows"]
    assert "last dimension must be h_length = 8" in e["h"]
    assert "inconsistent launch attributes" in e["h0"]
    assert "block_dim must be in [1, num_tiles]" in e["cores"]
    assert "tiling operand must have 40 uint32 words" in e["tiling"]
    assert all(v and v.startswith("JaxRuntimeError") for v in e.values()), e


# ------------------------------------------------------------------ export


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_exported_training_step_holds_only_ascendc_calls_for_the_norm(dtype):
    out = child(
        rf"""
jax_lngb.ascend.register_platform("ascend")
dt = jnp.{dtype}
def step(x, g, ct):
    y, back = jax.vjp(lambda a, b: jax_lngb.rms_norm(a, b), x, g)
    return y, back(ct)
x = jax.ShapeDtypeStruct((4096, 1024), dt)
g = jax.ShapeDtypeStruct((1024,), dt)
exp = jax_lngb.export.export(jax.jit(step), platforms=["ascend"])(x, g, x)
done(text=exp.mlir_module())
"""
    )
    text = out["text"]
    calls = [c for c in re.findall(r"custom_call @(\w+)", text) if c.startswith("jax_lngb")]
    assert sorted(calls) == ["jax_lngb_ascend_rms_norm_backward", "jax_lngb_ascend_rms_norm_forward"], calls
    # no jax.numpy row reduction: no reduce at all over the last axis (or any other)
    assert not re.search(r"stablehlo\.reduce[ (]", text), re.findall(r".*stablehlo\.reduce.*", text)[:3]
    # the tile layout of rstd: a [num_tiles, stride] slice, not a reduction
    p = ascend.plan_rms_norm((4096, 1024), np.dtype(dtype), backward=False)
    assert f"tensor<{p.num_tiles * p.rstd_stride}xf32>" in text
