"""Sharded inputs under plain `jit`: every device reduces its own rows, the
float32 partials of dgamma/dbeta are psum'd over the row-sharding mesh axes,
nothing is gathered.

The cases run in one child interpreter on 8 forced host devices
(`--xla_force_host_platform_device_count=8` must be set before jax starts;
this process keeps its single device). The child reports, per case, the
results, the output shardings and the collectives of the compiled HLO; this
module computes the references (float64 NumPy, and the same function on one
device) and asserts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import jax
import jax.numpy as jnp
import mesh_child
import numpy as np
import pytest
from conftest import U32, assert_sums_close, random_array, unit_roundoff

import jax_lngb

DEVICES = 8
CHILD = Path(mesh_child.__file__)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    op: str  # see mesh_child.build
    mesh: tuple[int, ...]
    axes: tuple[str, ...]
    spec: tuple  # PartitionSpec entries of the activations
    shape: tuple[int, ...]
    dtype: str = "float32"
    out_dtype: str | None = None
    param_dtype: str = "float32"
    shardy: bool = True
    h_sharded: bool = False

    @property
    def group_dims(self) -> int:
        return 1 if self.op in ("grad_beta_vmap", "layer_norm_per_example") else 0

    def rows_split(self) -> bool:
        """Whether a mesh axis (of size > 1) splits a row axis."""
        sizes = dict(zip(self.axes, self.mesh))
        entries = list(self.spec[self.group_dims : len(self.shape) - 1])
        axes = [a for e in entries if e is not None for a in (e if isinstance(e, (list, tuple)) else (e,))]
        return any(sizes[a] > 1 for a in axes)

    def local_groups(self) -> int:
        """Groups per device (the group axis may be split too)."""
        if not self.group_dims:
            return 1
        sizes = dict(zip(self.axes, self.mesh))
        e = self.spec[0] if self.spec else None
        split = int(np.prod([sizes[a] for a in (e if isinstance(e, (list, tuple)) else (e,)) if a]))
        return self.shape[0] // split

    def expected_all_reduce_bytes(self) -> int:
        """float32 dgamma + dbeta partials (per local group), + the loss."""
        h = self.shape[-1]
        if self.op in ("grad_beta", "grad_beta_vmap", "fused_backward_like"):
            return 2 * 4 * h * self.local_groups() if self.rows_split() else 0
        if self.op == "layer_norm_step":
            return 4 + 2 * 4 * h
        return 0  # per-example gradients and LayerNormGrad sum nothing over split rows

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()}


M1 = dict(mesh=(8,), axes=("data",))
M2 = dict(mesh=(4, 2), axes=("data", "model"))
M3 = dict(mesh=(2, 2, 2), axes=("data", "fsdp", "sequence"))

CASES = [
    # LayerNormGradBeta itself, 1-D data mesh
    Case("gb_data_f32", "grad_beta", **M1, spec=("data",), shape=(32, 4, 64)),
    Case("gb_data_bf16", "grad_beta", **M1, spec=("data",), shape=(32, 4, 64), dtype="bfloat16"),
    Case(
        "gb_data_f16_out_f32",
        "grad_beta",
        **M1,
        spec=("data",),
        shape=(32, 4, 64),
        dtype="float16",
        out_dtype="float32",
    ),
    Case("gb_sequence_f32", "grad_beta", **M1, spec=(None, "data"), shape=(4, 32, 64)),
    Case("gb_data_gspmd", "grad_beta", **M1, spec=("data",), shape=(32, 4, 64), shardy=False),
    # 2-D data x model mesh
    Case("gb_2d_data_only", "grad_beta", **M2, spec=("data",), shape=(16, 4, 64)),
    Case("gb_2d_data_seq_bf16", "grad_beta", **M2, spec=("data", "model"), shape=(16, 4, 64), dtype="bfloat16"),
    Case("gb_2d_joint_f16", "grad_beta", **M2, spec=(("data", "model"),), shape=(64, 64), dtype="float16"),
    Case("gb_2d_h_sharded", "grad_beta", **M2, spec=("data", None, "model"), shape=(16, 4, 64), h_sharded=True),
    Case(
        "gb_3d_batch_and_sequence_bf16",
        "grad_beta",
        **M3,
        spec=(("data", "fsdp"), "sequence"),
        shape=(8, 8, 64),
        dtype="bfloat16",
    ),
    # vmap: the group axis is split like any other, but never reduced
    Case("gbv_2d_group_model_rows_data", "grad_beta_vmap", **M2, spec=("model", "data"), shape=(2, 32, 64)),
    Case("gbv_group_only", "grad_beta_vmap", **M1, spec=("data",), shape=(8, 16, 64), dtype="bfloat16"),
    # jitted LayerNorm training steps (the VJP binds layer_norm_grad_beta_p)
    Case("ln_step_data_f32", "layer_norm_step", **M1, spec=("data",), shape=(16, 8, 64)),
    Case("ln_step_data_bf16", "layer_norm_step", **M1, spec=("data",), shape=(16, 8, 64), dtype="bfloat16"),
    Case("ln_step_2d_data_seq", "layer_norm_step", **M2, spec=("data", "model"), shape=(8, 8, 64)),
    Case(
        "ln_step_2d_bf16_params",
        "layer_norm_step",
        **M2,
        spec=("data",),
        shape=(8, 8, 64),
        dtype="bfloat16",
        param_dtype="bfloat16",
    ),
    Case(
        "ln_step_3d", "layer_norm_step", **M3, spec=(("data", "fsdp"), "sequence"), shape=(4, 8, 64), dtype="bfloat16"
    ),
    Case("ln_per_example", "layer_norm_per_example", **M1, spec=("data",), shape=(8, 16, 64)),
    # The partitioning helper on a fused-backward layout (row-wise dx + sums)
    Case(
        "fused_like_2d_bf16",
        "fused_backward_like",
        **M2,
        spec=("data", "model", None),
        shape=(8, 8, 64),
        dtype="bfloat16",
    ),
    Case("fused_like_1d_gspmd", "fused_backward_like", **M1, spec=("data", None), shape=(64, 64), shardy=False),
    # CANN LayerNormGrad (row-wise): its primitive comes with the fused-backward work.
    Case("lng_2d_data_seq", "layer_norm_grad", **M2, spec=("data", "model", None), shape=(8, 8, 64)),
]


def _needs(case: Case):
    if case.op == "layer_norm_grad" and not hasattr(jax_lngb, "layer_norm_grad"):
        return [pytest.mark.skip(reason="jax_lngb.layer_norm_grad is not part of this build yet")]
    return []


PARAMS = [pytest.param(c, id=c.name, marks=_needs(c)) for c in CASES]


def make_inputs(case: Case) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    dt = jnp.dtype(case.dtype)
    f32 = lambda a: np.asarray(a, np.float32)
    h = case.shape[-1]
    if case.op.startswith("grad_beta"):
        return {"res": f32(random_array(rng, case.shape, dt)), "dy": f32(random_array(rng, case.shape, dt))}
    pdt = jnp.dtype(case.param_dtype)
    arrays = {
        "x": f32(random_array(rng, case.shape, dt, scale=2.0) + 0.5),
        "target": f32(rng.standard_normal(case.shape)),
        "gamma": f32(np.linspace(0.5, 1.5, h).astype(pdt)),
        "beta": f32(np.linspace(-0.25, 0.25, h).astype(pdt)),
    }
    if case.op in ("layer_norm_grad", "fused_backward_like"):
        x64 = arrays["x"].astype(np.float64)
        arrays["dy"] = f32(random_array(rng, case.shape, dt))
        arrays["mean"] = f32(x64.mean(-1))
        arrays["variance"] = f32(x64.var(-1))
    return arrays


@pytest.fixture(scope="module")
def sharded(tmp_path_factory) -> dict:
    """Runs every available case in one child with 8 host devices."""
    work = tmp_path_factory.mktemp("mesh")
    cases = [c for c in CASES if not _needs(c)]
    for c in cases:
        np.savez(work / f"{c.name}.in.npz", **make_inputs(c))
    (work / "cases.json").write_text(json.dumps([c.to_json() for c in cases]))
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}")
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(work)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((work / "results.json").read_text())
    assert results["device_count"] == DEVICES
    return {"work": work, **results}


def child_outputs(sharded: dict, case: Case) -> tuple[dict, list[np.ndarray]]:
    info = sharded["cases"][case.name]
    assert "error" not in info, info["error"]
    outs = np.load(sharded["work"] / f"{case.name}.out.npz")
    return info, [outs[f"out{i}"] for i in range(len(outs.files))]


def single_device(case: Case, arrays: dict) -> list[np.ndarray]:
    """The same case on this process's one device."""
    one = dataclasses.replace(case, mesh=(1,) * len(case.mesh))
    info, outs = mesh_child.run_case(one.to_json(), arrays, np.array(jax.devices()[:1]))
    assert info["all-reduce"] == 0 and info["all-gather"] == 0
    return [outs[f"out{i}"] for i in range(len(outs))]


def check_collectives(case: Case, info: dict) -> None:
    if case.h_sharded:
        # The documented fallback: H is gathered, with a warning naming the axis.
        assert any("ShardingWarning" in w and "'model'" in w for w in info["warnings"]), info["warnings"]
    else:
        assert info["all-gather"] == 0, info
        assert info["all-to-all"] == 0 and info["collective-permute"] == 0, info
        assert not any("ShardingWarning" in w for w in info["warnings"]), info["warnings"]
    want = case.expected_all_reduce_bytes()
    got = info["all_reduce_bytes"]
    if want == 0:
        assert got == 0, info
    else:
        # "About" dgamma + dbeta (+ the loss): XLA may split the loss's mean
        # into two scalar all-reduces.
        assert want <= got <= 1.25 * want + 8, (got, want, info)
        assert info["all_reduce_dtypes"] == ["f32"], info  # partials summed in float32


@pytest.mark.parametrize("case", PARAMS)
def test_collectives(sharded, case):
    info, _ = child_outputs(sharded, case)
    check_collectives(case, info)


def _grad_beta_refs(case: Case, arrays: dict):
    res, dy = arrays["res"].astype(np.float64), arrays["dy"].astype(np.float64)
    h = case.shape[-1]
    if case.group_dims:
        g = case.shape[0]
        r, d = res.reshape(g, -1, h), dy.reshape(g, -1, h)
        return (r * d).sum(1), d.sum(1), np.abs(r * d).sum(1), np.abs(d).sum(1), r.shape[1]
    r, d = res.reshape(-1, h), dy.reshape(-1, h)
    return (r * d).sum(0), d.sum(0), np.abs(r * d).sum(0), np.abs(d).sum(0), r.shape[0]


@pytest.mark.parametrize("case", [p for p in PARAMS if p.values[0].op.startswith("grad_beta")])
def test_grad_beta_values(sharded, case):
    info, (pd_gamma, pd_beta) = child_outputs(sharded, case)
    arrays = make_inputs(case)
    ref_g, ref_b, abs_g, abs_b, n = _grad_beta_refs(case, arrays)
    out_dtype = case.out_dtype or case.dtype
    assert_sums_close(pd_gamma, ref_g, abs_g, n, jnp.dtype(out_dtype), "pd_gamma")
    assert_sums_close(pd_beta, ref_b, abs_b, n, jnp.dtype(out_dtype), "pd_beta")
    one = single_device(case, arrays)
    if not case.rows_split():
        # Each device ran the whole reduction of its groups: same bits.
        assert np.array_equal(pd_gamma, one[0]) and np.array_equal(pd_beta, one[1])
    group_spec = case.spec[0] if case.group_dims and case.spec else None
    expected_spec = str((group_spec, None) if case.group_dims else (None,))
    assert info["out_specs"] == [expected_spec] * 2 or case.h_sharded, info["out_specs"]


def _layer_norm_grad_terms(arrays: dict, per_example: bool):
    """float64 sums of |terms| of dgamma/dbeta for the loss of mesh_child."""
    x = arrays["x"].astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    xhat = (x - mean) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    y = xhat * arrays["gamma"] + arrays["beta"]
    n_per = x.size // x.shape[0] if per_example else x.size
    dy = (y - arrays["target"]) / n_per
    h = x.shape[-1]
    lead = (x.shape[0], -1, h) if per_example else (-1, h)
    t_g, t_b = np.abs(dy * xhat).reshape(lead), np.abs(dy).reshape(lead)
    axis = 1 if per_example else 0
    return t_g.sum(axis), t_b.sum(axis), t_g.shape[axis]


def _assert_close_to_single(got, single, abs_terms, n, out_dtype, what):
    """Two float32 summation orders of the same terms, each narrowed once."""
    k = (n + 1) * U32
    bound = 2 * k / (1 - k) * abs_terms + 2 * unit_roundoff(out_dtype) * np.abs(single) + 1e-30
    err = np.abs(np.asarray(got, np.float64) - np.asarray(single, np.float64))
    assert np.all(err <= bound), f"{what}: worst err {err.max()} vs bound {bound[np.argmax(err - bound)]}"


@pytest.mark.parametrize("case", [p for p in PARAMS if p.values[0].op == "layer_norm_step"])
def test_layer_norm_step_values(sharded, case):
    info, outs = child_outputs(sharded, case)
    arrays = make_inputs(case)
    one = single_device(case, arrays)
    loss, dgamma, dbeta = outs[:3]
    assert np.isfinite(loss) and abs(loss - one[0]) <= 1e-5 * abs(one[0])
    t_g, t_b, n = _layer_norm_grad_terms(arrays, per_example=False)
    pdt = jnp.dtype(case.param_dtype)
    _assert_close_to_single(dgamma, one[1], t_g, n, pdt, "dgamma")
    _assert_close_to_single(dbeta, one[2], t_b, n, pdt, "dbeta")
    assert all(s in ("()", "(None,)") for s in info["out_specs"]), info["out_specs"]  # replicated


@pytest.mark.parametrize("case", [p for p in PARAMS if p.values[0].op == "layer_norm_per_example"])
def test_per_example_values(sharded, case):
    info, (dgamma, dbeta) = child_outputs(sharded, case)
    arrays = make_inputs(case)
    one = single_device(case, arrays)
    # The example axis is split, every example's rows stay on one device.
    assert dgamma.shape == (case.shape[0], case.shape[-1])
    t_g, t_b, n = _layer_norm_grad_terms(arrays, per_example=True)
    _assert_close_to_single(dgamma, one[0], t_g, n, jnp.float32, "dgamma")
    _assert_close_to_single(dbeta, one[1], t_b, n, jnp.float32, "dbeta")
    assert info["out_specs"] == [str(("data", None))] * 2, info["out_specs"]


@pytest.mark.parametrize("case", [p for p in PARAMS if p.values[0].op == "layer_norm_grad"])
def test_layer_norm_grad_values(sharded, case):
    info, outs = child_outputs(sharded, case)
    arrays = make_inputs(case)
    one = single_device(case, arrays)
    for got, want in zip(outs, one):
        # Row-wise: every row is computed whole on one device.
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", [p for p in PARAMS if p.values[0].op == "fused_backward_like"])
def test_fused_backward_layout_values(sharded, case):
    info, (dx, dgamma, dbeta) = child_outputs(sharded, case)
    arrays = make_inputs(case)
    one = single_device(case, arrays)
    np.testing.assert_array_equal(dx, one[0])  # row-wise: whole rows on one device
    h = case.shape[-1]
    dy = arrays["dy"].astype(np.float64).reshape(-1, h)
    xc = (arrays["x"].astype(np.float64) - arrays["mean"][..., None]).reshape(-1, h)
    n = dy.shape[0]
    assert_sums_close(dgamma, (dy * xc).sum(0), np.abs(dy * xc).sum(0), n, jnp.dtype(case.dtype), "dgamma")
    assert_sums_close(dbeta, dy.sum(0), np.abs(dy).sum(0), n, jnp.dtype(case.dtype), "dbeta")
    assert info["out_specs"][0] == str(tuple(case.spec)), info["out_specs"]  # dx stays sharded
