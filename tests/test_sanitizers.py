"""The C++ kernel test driver (cpp/tests) under sanitizers: builds it with
AddressSanitizer + UndefinedBehaviorSanitizer and with ThreadSanitizer
through cpp/tests/run_sanitizers.sh, runs it, and fails on any failed case
or sanitizer report. Needs cmake and a C++ compiler with sanitizer runtimes
(skipped, saying which is missing, otherwise).

The builds go to build/sanitize-{asan,tsan} and are incremental.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "cpp" / "tests" / "run_sanitizers.sh"
# The test extra installs cmake and ninja into the environment; it need not
# be activated (CI runs .venv/bin/pytest), so look next to the interpreter.
ENV_BIN = Path(sys.executable).parent


def tool_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(ENV_BIN), env.get("PATH", "")])
    return env


def missing_toolchain(sanitizer: str) -> str | None:
    """Why this machine cannot build the sanitized driver, or None."""
    if not SCRIPT.exists():
        return f"{SCRIPT} is not in this checkout"
    path = tool_env()["PATH"]
    if shutil.which("cmake", path=path) is None:
        return f"cmake is neither on PATH nor in {ENV_BIN} (pip install '.[test]' provides it)"
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        return "no C++ compiler (c++, g++, clang++ or $CXX) on PATH"
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "probe.cc")
        src.write_text("int main() { return 0; }\n")
        proc = subprocess.run(
            [cxx, f"-fsanitize={sanitizer}", str(src), "-o", str(Path(tmp, "probe"))],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            return f"{cxx} cannot link with -fsanitize={sanitizer}: {proc.stderr.strip()[:300]}"
    return None


def run_script(mode: str) -> str:
    proc = subprocess.run(
        ["bash", str(SCRIPT), mode], cwd=ROOT, env=tool_env(), capture_output=True, text=True, timeout=1800
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"run_sanitizers.sh {mode} failed (rc {proc.returncode}):\n{out[-6000:]}"
    return out


def check_summaries(out: str, sections: int) -> None:
    summaries = re.findall(r"^(\d+) cases, (\d+) failed, (\d+) known failures", out, re.M)
    assert len(summaries) == sections, out[-4000:]
    for cases, failed, _ in summaries:
        assert int(cases) > 0 and int(failed) == 0, out[-4000:]
    # The timing driver ran once too and printed its figures.
    assert re.search(r"kernel [0-9.]+ ms .* probe [0-9.]+ ms .* kernel / probe [0-9.]+", out), out[-4000:]
    assert (
        "ERROR: AddressSanitizer" not in out and "runtime error:" not in out and "WARNING: ThreadSanitizer" not in out
    )


@pytest.mark.slow
def test_kernels_under_asan_and_ubsan():
    if reason := missing_toolchain("address,undefined"):
        pytest.skip(reason)
    out = run_script("asan")
    # Every case on the CPU's variant, then the grad_beta cases once per
    # lower ISA variant the CPU supports.
    lower = {"avx512": 2, "avx2": 1}.get(re.search(r"active ISA: (\w+)", out).group(1), 0)
    check_summaries(out, 1 + lower)


@pytest.mark.slow
def test_kernels_under_tsan():
    if reason := missing_toolchain("thread"):
        pytest.skip(reason)
    check_summaries(run_script("tsan"), 1)
