"""The built wheel in fresh virtual environments: the extension loads and the
kernel runs on the jax/jaxlib pair pip resolves, at both ends of the
supported range declared in pyproject.toml."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SMOKE = r"""
import json, sys
import numpy as np, jax, jax.numpy as jnp, jaxlib
import jax_lngb
x = jnp.arange(64, dtype=jnp.float32).reshape(1, 8, 8)
g, b = jax.jit(jax_lngb.layer_norm_grad_beta)(x, x)
assert np.array_equal(g, [8960, 9416, 9888, 10376, 10880, 11400, 11936, 12488]), g
assert np.array_equal(b, [224, 232, 240, 248, 256, 264, 272, 280]), b
gv, _ = jax.vmap(jax_lngb.layer_norm_grad_beta)(jnp.stack([x, 2 * x]), jnp.stack([x, x]))
assert np.array_equal(gv[1], 2 * np.asarray(g)), gv
dg = jax.jit(jax.grad(lambda gm: jax_lngb.layer_norm(x[0], gm, jnp.zeros(8)).sum()))(jnp.ones(8))
assert dg.shape == (8,) and np.all(np.isfinite(dg))
text = jax.jit(jax_lngb.layer_norm_grad_beta).lower(x, x).as_text()
assert "custom_call @jax_lngb_layer_norm_grad_beta" in text
print(json.dumps({"jax": jax.__version__, "jaxlib": jaxlib.__version__, "file": jax_lngb.__file__}))
"""


def _pyproject_range() -> tuple[str, str]:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'"jax>=([0-9.]+),<([0-9.]+)"', text)
    assert m, "pyproject.toml must declare jax>=LOW,<HIGH"
    return m.group(1), m.group(2)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(out)],
        capture_output=True, text=True, timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheels = list(out.glob("jax_lngb-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _clean_env() -> dict:
    # Nothing of the calling environment may leak in (a PYTHONPATH pointing
    # at a source tree would hide a broken wheel).
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _fresh_venv_run(tmp_path: Path, wheel: Path, *requirements: str) -> dict:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    inst = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(wheel), *requirements],
        capture_output=True, text=True, timeout=1800, env=_clean_env(),
    )
    assert inst.returncode == 0, inst.stdout[-3000:] + inst.stderr[-3000:]
    # Run outside the source tree so only the installed package is importable.
    run = subprocess.run([str(py), "-c", SMOKE], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env=_clean_env())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    import json

    info = json.loads(run.stdout.strip().splitlines()[-1])
    assert str(env_dir) in info["file"]
    return info


@pytest.mark.slow
def test_fresh_venv_newest_allowed_jax(tmp_path, wheel):
    low, high = _pyproject_range()
    info = _fresh_venv_run(tmp_path, wheel)
    assert tuple(map(int, info["jax"].split(".")[:2])) < tuple(map(int, high.split(".")[:2]))


@pytest.mark.slow
def test_fresh_venv_oldest_supported_jax(tmp_path, wheel):
    low, _ = _pyproject_range()
    info = _fresh_venv_run(tmp_path, wheel, f"jax=={low}", f"jaxlib=={low}")
    assert info["jax"] == low and info["jaxlib"] == low
