"""The built wheel in fresh virtual environments, at both ends of the
supported range declared in pyproject.toml: it installs with no compiler on
PATH (and CC/CXX pointing nowhere) and only binary distributions, together
with its `test` extra (Flax, Equinox, optax); the extension loads and the
kernel runs on the jax/jaxlib pair pip resolves; and a subset of this test
suite passes against the installed package, outside the source tree."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

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
import flax, equinox, jax_lngb.flax, jax_lngb.nnx, jax_lngb.equinox
print(json.dumps({"jax": jax.__version__, "jaxlib": jaxlib.__version__, "file": jax_lngb.__file__,
                  "flax": flax.__version__, "equinox": equinox.__version__}))
"""

# The part of the suite run against the installed wheel: the kernel, its
# batching rule, the command line, and the drop-in modules, which depend
# most on the versions pip resolves. (Determinism, validation and the
# LayerNorm-function tests run in the development environment; the drop-in
# tests exercise layer_norm through every module.)
INSTALLED_TESTS = ["test_grad_beta.py", "test_batching.py", "test_cli.py"]
DROP_IN_TESTS = ["test_flax.py", "test_nnx.py", "test_equinox.py"]
# Where the resolved versions equal the development environment's, a
# representative part of the drop-in tests is enough.
DROP_IN_SUBSET = "training_step or checkpoint or vmapped_backward or import_error or bf16-x-bf16-out"
TEST_HELPERS = ["conftest.py", "norm_reference.py"]

COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "c89", "c99")


def _pyproject_low() -> str:
    # No upper bound: the handlers are built against the oldest supported
    # jaxlib's FFI headers, which load on every newer jaxlib.
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'"jax>=([0-9.]+)"', text)
    assert m, "pyproject.toml must declare jax>=LOW (and no upper bound)"
    assert re.search(r'"jaxlib>=' + re.escape(m.group(1)) + '"', text), "jax and jaxlib share their lower bound"
    return m.group(1)


def _extra_lower_bound(dist: str) -> str:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(rf'^{dist} = \[\s*"{dist}>=([0-9.]+)"', text, re.M)
    assert m, f"pyproject.toml must declare the extra {dist} = ['{dist}>=LOW']"
    return m.group(1)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheels = list(out.glob("jax_lngb-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_holds_the_compiled_extension_and_declares_the_extras(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert any(re.fullmatch(r"jax_lngb/_cpu\..*\.so", n) for n in names), names
    for module in (
        "flax",
        "nnx",
        "equinox",
        "__main__",
        "_integrations/flax_layer_norm",
        "_ops/primitives",
        "cli/main",
    ):
        assert f"jax_lngb/{module}.py" in names
    assert not any(n.endswith((".cc", ".h", "CMakeLists.txt")) for n in names)  # nothing left to compile
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", meta, re.M))
    assert {"flax", "equinox", "test"} <= extras
    requires = re.findall(r"^Requires-Dist: (.+)$", meta, re.M)
    for dist, extras_needing in (("flax", ("flax", "test")), ("equinox", ("equinox", "test"))):
        for extra in extras_needing:
            assert any(r.startswith(dist) and f'extra == "{extra}"' in r for r in requires), (dist, extra, requires)
    assert any(r.startswith("optax") and 'extra == "test"' in r for r in requires)
    # The README's command is a console script.
    with zipfile.ZipFile(wheel) as z:
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert re.search(r"^\[console_scripts\]\s*^jax-lngb = jax_lngb\.__main__:main$", entry_points, re.M | re.S), (
        entry_points
    )


def _no_compiler_env(env_dir: Path, tmp_path: Path) -> dict:
    """The calling environment minus anything that could reach a compiler or
    leak the source tree: PATH is the venv's bin alone, CC/CXX point to a
    file that does not exist."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    path = str(env_dir / "bin")
    for tool in COMPILERS:
        assert shutil.which(tool, path=path) is None, f"{tool} is reachable on {path}"
    missing = tmp_path / "no-such-compiler"
    env.update(PATH=path, CC=str(missing / "cc"), CXX=str(missing / "c++"))
    return env


def _version(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _install(tmp_path: Path, wheel: Path, *requirements: str) -> tuple[Path, dict, dict]:
    """A fresh venv with the wheel and its test extra, installed with no
    compiler and binaries only; the smoke check run in it. Returns (python,
    environment, versions) and leaves a copy of the tests in tmp_path."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    env = _no_compiler_env(env_dir, tmp_path)
    # Binary distributions only: pip may not build anything, here or in any
    # dependency.
    inst = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--only-binary=:all:", f"{wheel}[test]", *requirements],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert inst.returncode == 0, inst.stdout[-3000:] + inst.stderr[-3000:]
    # Run outside the source tree so only the installed package is importable.
    run = subprocess.run([str(py), "-c", SMOKE], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    info = json.loads(run.stdout.strip().splitlines()[-1])
    assert str(env_dir) in info["file"]
    # The console script the README shows, from an unrelated folder.
    cli = subprocess.run(
        [str(env_dir / "bin" / "jax-lngb"), "--version"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert cli.returncode == 0 and cli.stdout.startswith("jax_lngb "), cli.stdout + cli.stderr[-2000:]
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in TEST_HELPERS + INSTALLED_TESTS + DROP_IN_TESTS:
        shutil.copy(TESTS / name, tests / name)
    return py, env, info


def _pytest(py: Path, env: dict, tmp_path: Path, files: list[str], select: str | None = None) -> None:
    """Runs the copied tests with the venv's interpreter; every selected test
    must pass (none skipped)."""
    cmd = [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", *(f"tests/{n}" for n in files)]
    if select:
        cmd += ["-k", select]
    suite = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, cwd=tmp_path, env=env)
    assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
    summary = suite.stdout.strip().splitlines()[-1]
    assert re.search(r"\b\d+ passed\b", summary) and "skipped" not in summary, summary


def _same_as_development(info: dict) -> bool:
    import importlib.metadata

    return all(info[d] == importlib.metadata.version(d) for d in ("jax", "jaxlib", "flax", "equinox"))


@pytest.mark.slow
def test_fresh_venv_newest_allowed_jax(tmp_path, wheel):
    low = _pyproject_low()
    py, env, info = _install(tmp_path, wheel)
    # Whatever pip resolves for this Python: at least the oldest supported.
    assert _version(info["jax"]) >= _version(low)
    # Everything where pip resolved other versions than the ones the suite
    # runs on in development; a representative part otherwise.
    same = _same_as_development(info)
    _pytest(py, env, tmp_path, [t for t in INSTALLED_TESTS if not (same and t == "test_grad_beta.py")])
    _pytest(py, env, tmp_path, DROP_IN_TESTS, DROP_IN_SUBSET if same else None)


@pytest.mark.slow
def test_fresh_venv_oldest_supported_jax(tmp_path, wheel):
    low = _pyproject_low()
    flax_low, equinox_low = _extra_lower_bound("flax"), _extra_lower_bound("equinox")
    py, env, info = _install(
        tmp_path, wheel, f"jax=={low}", f"jaxlib=={low}", f"flax=={flax_low}", f"equinox=={equinox_low}"
    )
    assert info["jax"] == low and info["jaxlib"] == low
    assert _version(info["flax"]) == _version(flax_low) and _version(info["equinox"]) == _version(equinox_low)
    _pytest(py, env, tmp_path, INSTALLED_TESTS)
    _pytest(py, env, tmp_path, DROP_IN_TESTS)  # all of them: the oldest releases differ most
