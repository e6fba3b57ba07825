"""Two processes on localhost (jax.distributed, CPU collectives over gloo),
two host devices each: a data-parallel jitted LayerNorm training step gives
the gradients and parameters of the same step run in one process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import multiprocess_child as mp
import numpy as np
import pytest
from conftest import U32

CHILD = Path(mp.__file__)
PROCESSES, LOCAL_DEVICES = 2, 2
B, S, H = 8, 8, 64


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(99)
    return {
        "x": (rng.standard_normal((B, S, H)) * 2 + 0.5).astype(np.float32),
        "target": rng.standard_normal((B, S, H)).astype(np.float32),
        "gamma": np.linspace(0.5, 1.5, H, dtype=np.float32),
        "beta": np.linspace(-0.25, 0.25, H, dtype=np.float32),
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[dict, dict]:
    work = tmp_path_factory.mktemp("multiprocess")
    np.savez(work / "inputs.npz", **_inputs())
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={LOCAL_DEVICES}", JAX_PLATFORMS="cpu")
    port = _free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), str(i), str(PROCESSES), str(port), str(work)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=tempfile.gettempdir(),
        )
        for i in range(PROCESSES)
    ]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=300)[0])
    finally:
        for p in procs:  # never leave a peer waiting on a dead coordinator
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-4000:]
    result = dict(np.load(work / "result.npz"))
    return result, json.loads((work / "result.json").read_text())


def _single_process() -> dict:
    a = _inputs()
    x, target = jnp.asarray(a["x"], jnp.bfloat16), jnp.asarray(a["target"])
    params = (jnp.asarray(a["gamma"]), jnp.asarray(a["beta"]))
    step = jax.jit(mp.train_step)
    first = None
    for _ in range(mp.STEPS):
        loss, grads, params = step(params, x, target)
        if first is None:
            first = (loss, *grads)
    return {"loss": first[0], "dgamma": first[1], "dbeta": first[2], "gamma": params[0], "beta": params[1]}


def test_topology(run):
    _, info = run
    assert info["process_count"] == PROCESSES
    assert info["local_device_count"] == LOCAL_DEVICES
    assert info["device_count"] == PROCESSES * LOCAL_DEVICES


def test_step_keeps_activations_local(run):
    _, info = run
    assert info["all_gather"] == 0 and info["all_reduce"] >= 1


def _abs_terms() -> tuple[np.ndarray, np.ndarray]:
    """float64 sums over rows of |dL/dy * xhat| and |dL/dy| (first step)."""
    a = _inputs()
    x = np.asarray(jnp.asarray(a["x"], jnp.bfloat16), np.float64)
    xhat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    y = xhat * a["gamma"] + a["beta"]
    # y is rounded to bfloat16 before the loss: bound |dL/dy| from above.
    dy = (np.abs(y - a["target"]) + np.abs(y) * 2.0**-8) / x.size
    return np.abs(dy * xhat).reshape(-1, H).sum(0), dy.reshape(-1, H).sum(0)


def test_gradients_equal_single_process(run):
    got, _ = run
    want = _single_process()
    # The same float32 terms added in another order (per-device partials,
    # then the all-reduce): each result is within gamma_n * sum|terms| of the
    # exact sum, so the two are within twice that.
    k = (B * S + 1) * U32
    for name, terms in zip(("dgamma", "dbeta"), _abs_terms()):
        w = np.asarray(want[name], np.float64)
        bound = 2 * k / (1 - k) * terms + 1e-30
        err = np.abs(got[name] - w)
        assert np.all(err <= bound), f"{name}: worst {err.max()} vs {bound[np.argmax(err - bound)]}"
        assert np.abs(w).max() > 0
    np.testing.assert_allclose(got["loss"], np.asarray(want["loss"]), rtol=1e-5)
    for name in ("gamma", "beta"):
        np.testing.assert_allclose(got[name], np.asarray(want[name]), rtol=1e-5, atol=1e-6, err_msg=name)
