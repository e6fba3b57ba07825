"""Runs sharded cases on a forced multi-device CPU host (see test_sharding.py).

Usage: python mesh_child.py WORKDIR. WORKDIR holds cases.json and one
`<name>.in.npz` per case (float32 arrays, already rounded to the case's
dtype). For each case this writes `<name>.out.npz` (results as float32) and
an entry in results.json: the collectives of the compiled HLO, the output
shardings, the warnings raised while compiling, or the error.

XLA_FLAGS must force the device count before jax initializes; the parent
sets it in the environment.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import traceback
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import jax_lngb

_BYTES = {
    "pred": 1,
    "s8": 1,
    "u8": 1,
    "f16": 2,
    "bf16": 2,
    "s16": 2,
    "u16": 2,
    "f32": 4,
    "s32": 4,
    "u32": 4,
    "f64": 8,
    "s64": 8,
    "u64": 8,
}
_COLLECTIVES = ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter")


def collectives(hlo: str) -> dict:
    """Counts the collectives of a compiled HLO module; all-reduce shapes."""
    out = {k: 0 for k in _COLLECTIVES}
    reduce_shapes = []
    for line in hlo.splitlines():
        for k in _COLLECTIVES:
            m = re.search(rf"=\s+(.*?)\s+{k}(?:-start)?\(", line)
            if m:
                out[k] += 1
                if k == "all-reduce":
                    reduce_shapes += re.findall(r"\b([a-z]+[0-9]*)\[([0-9,]*)\]", m.group(1))
    out["all_reduce_bytes"] = sum(
        _BYTES[dt] * int(np.prod([int(d) for d in dims.split(",") if d])) for dt, dims in reduce_shapes
    )
    out["all_reduce_dtypes"] = sorted({dt for dt, _ in reduce_shapes})
    return out


def spec_of(entries) -> PartitionSpec:
    return PartitionSpec(*(tuple(e) if isinstance(e, list) else e for e in entries))


def loss_from_y(y, target):
    return 0.5 * jnp.mean(jnp.square(y.astype(jnp.float32) - target))


@functools.cache
def fused_backward_like() -> jax.extend.core.Primitive:
    """A stand-in with the layout of a fused LayerNorm backward, partitioned
    by the same helper as our kernels: row-wise dx plus dgamma/dbeta sums.

    (dy, x, mean [rows], gamma [H]) -> (dx = dy * gamma, sum(dy * (x - mean)), sum(dy))
    Its local lowering is jax.numpy, so this checks the partitioning alone.
    """
    from jax.extend.core import Primitive
    from jax.interpreters import mlir

    from jax_lngb._core import partitioning as part
    from jax_lngb._core.avals import derived_aval

    public, local = Primitive("fused_backward_like"), Primitive("fused_backward_like_local")

    def abstract(dy, x, mean, gamma, *, out_dtype):
        ins = (x, mean, gamma)
        dx = derived_aval(dy, dy.shape, dy.dtype, tuple(range(dy.ndim)), inputs=ins)
        s = derived_aval(dy, dy.shape[-1:], out_dtype, (None,), inputs=ins)
        return dx, s, s

    def reference(dy, x, mean, gamma, *, out_dtype):
        rows = tuple(range(dy.ndim - 1))
        d = dy.astype(jnp.float32)
        dx = (d * gamma.astype(jnp.float32)).astype(dy.dtype)
        xc = x.astype(jnp.float32) - mean[..., None]
        return [dx, jnp.sum(d * xc, rows).astype(out_dtype), jnp.sum(d, rows).astype(out_dtype)]

    def layout(dy, x, mean, gamma, *, out_dtype):
        return part.RowLayout(
            0, dy.ndim - 1, (part.ROWS_H, part.ROWS_H, part.ROWS, part.PARAM_H), (part.ROWS_H, part.SUM_H, part.SUM_H)
        )

    for p in (public, local):
        p.multiple_results = True
        p.def_abstract_eval(abstract)
    mlir.register_lowering(local, mlir.lower_fun(reference, multiple_results=True))
    part.register_row_partitioning(public, local, layout, reference=reference, widen_params=part.float32_sums)
    return public


def build(case: dict, arrays: dict, mesh: Mesh):
    """The jitted function and its (sharded) arguments for one case."""
    dt = jnp.dtype(case["dtype"])
    act = NamedSharding(mesh, spec_of(case["spec"]))
    rep = NamedSharding(mesh, PartitionSpec())
    put = lambda a, sh, d=dt: jax.device_put(jnp.asarray(a, d), sh)
    op = case["op"]
    if op in ("grad_beta", "grad_beta_vmap"):
        out_dtype = case.get("out_dtype")
        f = functools.partial(jax_lngb.layer_norm_grad_beta, out_dtype=out_dtype and jnp.dtype(out_dtype))
        f = jax.vmap(f) if op == "grad_beta_vmap" else f
        return jax.jit(f), (put(arrays["res"], act), put(arrays["dy"], act))
    pdt = jnp.dtype(case.get("param_dtype", "float32"))
    if op == "fused_backward_like":
        rows = NamedSharding(mesh, spec_of(case["spec"][:-1]))
        prim = fused_backward_like()
        f = lambda *a: prim.bind(*a, out_dtype=np.dtype(case.get("out_dtype") or dt))
        args = (
            put(arrays["dy"], act),
            put(arrays["x"], act),
            put(arrays["mean"], rows, jnp.float32),
            put(arrays["gamma"], rep, pdt),
        )
        return jax.jit(f), args
    if op == "layer_norm_step":
        lr = 0.1

        def step(params, x, target):
            loss, grads = jax.value_and_grad(lambda p: loss_from_y(jax_lngb.layer_norm(x, *p), target))(params)
            new = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
            return loss, grads, new

        params = (put(arrays["gamma"], rep, pdt), put(arrays["beta"], rep, pdt))
        return jax.jit(step), (params, put(arrays["x"], act), put(arrays["target"], act, jnp.float32))
    if op == "layer_norm_per_example":
        # vmap(grad): one gamma/beta gradient per example (the group axis).
        def per_example(params, x, target):
            g = jax.grad(lambda p, xe, te: loss_from_y(jax_lngb.layer_norm(xe, *p), te))
            return jax.vmap(g, in_axes=(None, 0, 0))(params, x, target)

        params = (put(arrays["gamma"], rep, pdt), put(arrays["beta"], rep, pdt))
        return jax.jit(per_example), (params, put(arrays["x"], act), put(arrays["target"], act, jnp.float32))
    if op == "layer_norm_grad":
        # CANN LayerNormGrad: row-wise, nothing summed over rows.
        rows = NamedSharding(mesh, spec_of(case["spec"][:-1]))
        f = functools.partial(jax_lngb.layer_norm_grad, epsilon=1e-5)
        args = (
            put(arrays["dy"], act),
            put(arrays["x"], act),
            put(arrays["variance"], rows, jnp.float32),
            put(arrays["mean"], rows, jnp.float32),
            put(arrays["gamma"], rep, pdt),
        )
        return jax.jit(f), args
    raise ValueError(f"unknown op {op!r}")


def run_case(case: dict, arrays: dict, devices: np.ndarray) -> tuple[dict, dict]:
    mesh = Mesh(devices[: int(np.prod(case["mesh"]))].reshape(case["mesh"]), tuple(case["axes"]))
    shardy = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", case.get("shardy", True))
    try:
        fn, args = build(case, arrays, mesh)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled = fn.lower(*args).compile()
            outs = fn(*args)
    finally:
        jax.config.update("jax_use_shardy_partitioner", shardy)
    leaves = jax.tree_util.tree_leaves(outs)
    info = collectives(compiled.as_text())
    # Padded to the rank: P() and P(None) of a vector are the same sharding.
    info["out_specs"] = [str(tuple(x.sharding.spec) + (None,) * (x.ndim - len(x.sharding.spec))) for x in leaves]
    info["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    return info, {f"out{i}": np.asarray(x, np.float32) for i, x in enumerate(leaves)}


def main(workdir: str) -> None:
    work = Path(workdir)
    cases = json.loads((work / "cases.json").read_text())
    devices = np.array(jax.devices())
    results = {"device_count": len(devices), "jax": jax.__version__, "cases": {}}
    for case in cases:
        arrays = dict(np.load(work / f"{case['name']}.in.npz"))
        try:
            info, outs = run_case(case, arrays, devices)
            np.savez(work / f"{case['name']}.out.npz", **outs)
        except Exception:
            info = {"error": traceback.format_exc()[-4000:]}
        results["cases"][case["name"]] = info
    (work / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
