"""Runs the shard_map scenarios of test_shard_map.py on forced host devices.

Usage: python shard_map_child.py WORKDIR. Reads WORKDIR/inputs.npz, writes
WORKDIR/<scenario>.npz (results as float64) and WORKDIR/results.json (per
scenario: the types seen inside the body, lowered/compiled HLO facts, or
the error). XLA_FLAGS must force 4 host devices.
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import jax_lngb
from jax_lngb import psum_to_match
from jax_lngb._core.avals import varying_axes

AXIS = "data"


def mesh_1d() -> Mesh:
    return Mesh(np.array(jax.devices()[:4]), (AXIS,))


def loss_local(x, gamma, beta, w, ln):
    return jnp.sum(ln(x, gamma, beta).astype(jnp.float32) * w)


def layer_norm_grads(a: dict, check_vma: bool, ln=jax_lngb.layer_norm):
    """d(loss)/d(x, gamma, beta) with x, w split over rows, gamma/beta replicated."""

    def body(x, gamma, beta, w):
        return jax.lax.psum(loss_local(x, gamma, beta, w, ln), AXIS)

    f = jax.shard_map(body, mesh=mesh_1d(), in_specs=(P(AXIS), P(), P(), P(AXIS)), out_specs=P(), check_vma=check_vma)
    return jax.jit(jax.grad(f, argnums=(0, 1, 2)))(a["x"], a["gamma"], a["beta"], a["w"]), {}


@functools.partial(jax.custom_vjp)
def affine(xhat, gamma, beta):
    """LayerNorm's affine tail with a hand-written VJP that uses the primitive."""
    return xhat * gamma + beta


def _affine_fwd(xhat, gamma, beta):
    return affine(xhat, gamma, beta), (xhat, gamma, beta)


def _affine_bwd(res, dy):
    xhat, gamma, beta = res
    pd_gamma, pd_beta = jax_lngb.layer_norm_grad_beta(xhat, dy)
    # The recipe: each cotangent gets its primal's type, one psum at most.
    return psum_to_match(dy * gamma, xhat), psum_to_match(pd_gamma, gamma), psum_to_match(pd_beta, beta)


affine.defvjp(_affine_fwd, _affine_bwd)


def scenario_grad_beta(a):
    seen = {}

    def body(res, dy):
        g, b = jax_lngb.layer_norm_grad_beta(res, dy)
        seen["vma"] = sorted(map(str, varying_axes(jax.typeof(g))))
        return jax.lax.psum(g, AXIS), jax.lax.psum(b, AXIS)

    f = jax.jit(jax.shard_map(body, mesh=mesh_1d(), in_specs=(P(AXIS), P(AXIS)), out_specs=(P(), P()), check_vma=True))
    text = f.lower(a["res"], a["dy"]).as_text()
    seen["kernel_call"] = "jax_lngb_layer_norm_grad_beta" in text
    seen["partitioning_call"] = "CustomSPMDPartitioning" in text
    return f(a["res"], a["dy"]), seen


def scenario_grad_beta_vmap(a):
    seen = {}

    def body(res, dy):
        g, b = jax.vmap(jax_lngb.layer_norm_grad_beta)(res, dy)
        seen["vma"] = sorted(map(str, varying_axes(jax.typeof(g))))
        return jax.lax.psum(g, AXIS), jax.lax.psum(b, AXIS)

    f = jax.shard_map(
        body, mesh=mesh_1d(), in_specs=(P(None, AXIS), P(None, AXIS)), out_specs=(P(), P()), check_vma=True
    )
    return jax.jit(f)(a["res_g"], a["dy_g"]), seen


def scenario_grad_beta_jvp(a):
    def body(res, dy, dres, ddy):
        primal, tangent = jax.jvp(jax_lngb.layer_norm_grad_beta, (res, dy), (dres, ddy))
        return jax.lax.psum((*primal, *tangent), AXIS)

    f = jax.shard_map(body, mesh=mesh_1d(), in_specs=(P(AXIS),) * 4, out_specs=(P(),) * 4, check_vma=True)
    return jax.jit(f)(a["res"], a["dy"], a["dres"], a["ddy"]), {}


def scenario_affine_recipe(a):
    def body(xhat, gamma, beta, w):
        return jax.lax.psum(jnp.sum(affine(xhat, gamma, beta) * w), AXIS)

    f = jax.shard_map(body, mesh=mesh_1d(), in_specs=(P(AXIS), P(), P(), P(AXIS)), out_specs=P(), check_vma=True)
    return jax.jit(jax.grad(f, argnums=(0, 1, 2)))(a["res"], a["gamma"], a["beta"], a["w"]), {}


def scenario_partial_manual(a):
    """Manual over 'data' only; XLA keeps 'model', which also splits rows."""
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), (AXIS, "model"))

    def body(res, dy):
        g, b = jax_lngb.layer_norm_grad_beta(res, dy)
        return jax.lax.psum(g, AXIS), jax.lax.psum(b, AXIS)

    f = jax.jit(
        jax.shard_map(
            body,
            mesh=mesh,
            in_specs=(P(AXIS), P(AXIS)),
            out_specs=(P(), P()),
            axis_names=frozenset({AXIS}),
            check_vma=True,
        )
    )
    sh = NamedSharding(mesh, P(AXIS, "model"))
    res, dy = jax.device_put(a["res"], sh), jax.device_put(a["dy"], sh)
    hlo = f.lower(res, dy).compile().as_text()
    return f(res, dy), {"all_gather": hlo.count(" all-gather(") + hlo.count(" all-gather-start(")}


SCENARIOS = {
    "grad_beta": scenario_grad_beta,
    "grad_beta_vmap": scenario_grad_beta_vmap,
    "grad_beta_jvp": scenario_grad_beta_jvp,
    "affine_recipe": scenario_affine_recipe,
    "partial_manual": scenario_partial_manual,
    "layer_norm_check_vma": lambda a: layer_norm_grads(a, check_vma=True),
    "layer_norm_no_check_vma": lambda a: layer_norm_grads(a, check_vma=False),
}


def main(workdir: str) -> None:
    work = Path(workdir)
    arrays = {k: jnp.asarray(v) for k, v in np.load(work / "inputs.npz").items()}
    results = {"device_count": jax.device_count()}
    for name, fn in SCENARIOS.items():
        try:
            outs, seen = fn(arrays)
            np.savez(work / f"{name}.npz", *[np.asarray(o, np.float64) for o in jax.tree_util.tree_leaves(outs)])
            results[name] = seen
        except Exception:
            results[name] = {"error": traceback.format_exc()[-3000:]}
    (work / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
