"""Our primitives inside `jax.shard_map`: per-shard sums typed as varying
over the manual axes, so replicated parameters get their gradient psum'd
exactly once.

The scenarios run in one child interpreter with 4 forced host devices (see
shard_map_child.py); this module computes the references and asserts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np
import pytest
import shard_map_child
from conftest import assert_sums_close

import jax_lngb

CHILD = Path(shard_map_child.__file__)
ROWS, H = 16, 64


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2024)
    n = lambda *s: rng.standard_normal(s).astype(np.float32)
    return {
        "res": n(ROWS, H),
        "dy": n(ROWS, H),
        "dres": n(ROWS, H),
        "ddy": n(ROWS, H),
        "res_g": n(2, ROWS, H),
        "dy_g": n(2, ROWS, H),
        "x": n(ROWS, H) * 2 + 1,
        "w": n(ROWS, H),
        "gamma": np.linspace(0.5, 1.5, H, dtype=np.float32),
        "beta": np.linspace(-1, 1, H, dtype=np.float32),
    }


INPUTS = _inputs()


@pytest.fixture(scope="module")
def child(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("shard_map")
    np.savez(work / "inputs.npz", **INPUTS)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
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
    assert results["device_count"] == 4
    return {"work": work, **results}


def outputs(child: dict, name: str) -> tuple[list[np.ndarray], dict]:
    info = child[name]
    assert "error" not in info, info["error"]
    data = np.load(child["work"] / f"{name}.npz")
    return [data[f"arr_{i}"] for i in range(len(data.files))], info


def _sums(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-2), np.abs(a * b).sum(-2)


def test_grad_beta_outputs_vary_over_the_manual_axis(child):
    (g, b), info = outputs(child, "grad_beta")
    assert info["vma"] == ["data"]  # per-shard partial sums, not replicated values
    ref_g, abs_g = _sums(INPUTS["res"], INPUTS["dy"])
    dy = INPUTS["dy"].astype(np.float64)
    assert_sums_close(g, ref_g, abs_g, ROWS, np.float32, "pd_gamma")
    assert_sums_close(b, dy.sum(0), np.abs(dy).sum(0), ROWS, np.float32, "pd_beta")


def test_fully_manual_body_calls_the_kernel_directly(child):
    _, info = outputs(child, "grad_beta")
    assert info["kernel_call"] and not info["partitioning_call"]


def test_vmap_inside_shard_map(child):
    (g, b), info = outputs(child, "grad_beta_vmap")
    assert info["vma"] == ["data"] and g.shape == (2, H)
    ref_g, abs_g = _sums(INPUTS["res_g"], INPUTS["dy_g"])
    dy = INPUTS["dy_g"].astype(np.float64)
    assert_sums_close(g, ref_g, abs_g, ROWS, np.float32, "pd_gamma")
    assert_sums_close(b, dy.sum(1), np.abs(dy).sum(1), ROWS, np.float32, "pd_beta")


def test_jvp_inside_shard_map(child):
    (g, b, tg, tb), _ = outputs(child, "grad_beta_jvp")
    f = lambda k: INPUTS[k].astype(np.float64)
    ref_g, abs_g = _sums(f("res"), f("dy"))
    assert_sums_close(g, ref_g, abs_g, ROWS, np.float32, "pd_gamma")
    t1, a1 = _sums(f("dres"), f("dy"))
    t2, a2 = _sums(f("res"), f("ddy"))
    assert_sums_close(tg, t1 + t2, a1 + a2, 2 * ROWS, np.float32, "tangent pd_gamma")
    assert_sums_close(tb, f("ddy").sum(0), np.abs(f("ddy")).sum(0), ROWS, np.float32, "tangent pd_beta")


def test_custom_vjp_recipe_sums_replicated_parameter_gradients_once(child):
    (dxhat, dgamma, dbeta), _ = outputs(child, "affine_recipe")
    w, xhat, gamma = (INPUTS[k].astype(np.float64) for k in ("w", "res", "gamma"))
    np.testing.assert_allclose(dxhat, w * gamma, rtol=1e-6)
    ref_g, abs_g = _sums(xhat, w)
    # psum'd zero times would be a quarter of this; twice, four times it.
    assert_sums_close(dgamma, ref_g, abs_g, ROWS, np.float32, "dgamma")
    assert_sums_close(dbeta, w.sum(0), np.abs(w).sum(0), ROWS, np.float32, "dbeta")


def test_partially_manual_shard_map_keeps_rows_local(child):
    (g, b), info = outputs(child, "partial_manual")
    assert info["all_gather"] == 0
    ref_g, abs_g = _sums(INPUTS["res"], INPUTS["dy"])
    assert_sums_close(g, ref_g, abs_g, ROWS, np.float32, "pd_gamma")


def _layer_norm_reference():
    a = {k: jax.numpy.asarray(v) for k, v in INPUTS.items()}
    return jax.grad(shard_map_child.loss_local, argnums=(0, 1, 2))(
        a["x"], a["gamma"], a["beta"], a["w"], jax_lngb.layer_norm_jnp
    )


def _check_layer_norm(child, name):
    got, _ = outputs(child, name)
    for what, g, r in zip(("dx", "dgamma", "dbeta"), got, _layer_norm_reference()):
        r = np.asarray(r, np.float64)
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5 * np.abs(r).max(), err_msg=what)


def test_layer_norm_gradients_check_vma_false(child):
    # Untyped mode: shard_map's own transpose sums the replicated gradients.
    _check_layer_norm(child, "layer_norm_no_check_vma")


def test_layer_norm_gradients_check_vma_true(child):
    # The transpose of LayerNorm's tangent sums the gamma/beta partials of
    # the devices with psum_to_match, as JAX's type check requires.
    _check_layer_norm(child, "layer_norm_check_vma")
