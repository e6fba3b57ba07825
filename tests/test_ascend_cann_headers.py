"""The Ascend kernel source against CANN's real AscendC headers.

cpp/ascend/tools/check_against_cann.sh type-checks grad_beta_kernel.asc with
g++ in CANN's CPU-debug mode for dav-2201, dav-3510 and dav-2002 against a
local asc-devkit checkout (and asc-tools for the CPU-debug headers), and
makes sure deliberate argument mistakes are rejected. CANN's sources are not
part of this repository, so the check runs only where
$JAX_LNGB_ASC_DEVKIT names an asc-devkit checkout ($JAX_LNGB_ASC_TOOLS an
asc-tools one; default: asc-tools next to it). It takes about 30 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "cpp" / "ascend" / "tools" / "check_against_cann.sh"


def _checkouts() -> tuple[Path, Path] | str:
    """(asc-devkit, asc-tools), or why the check cannot run here."""
    raw = os.environ.get("JAX_LNGB_ASC_DEVKIT", "").strip()
    if not raw:
        return (
            "JAX_LNGB_ASC_DEVKIT is not set: point it at a checkout of CANN's asc-devkit "
            "(and JAX_LNGB_ASC_TOOLS at asc-tools) to type-check the kernel against CANN's headers"
        )
    devkit = Path(raw)
    if not (devkit / "include" / "kernel_operator.h").is_file():
        return f"JAX_LNGB_ASC_DEVKIT={raw} is not an asc-devkit checkout (no include/kernel_operator.h)"
    tools = Path(os.environ.get("JAX_LNGB_ASC_TOOLS", "").strip() or devkit.parent / "asc-tools")
    if not (tools / "cpudebug" / "include" / "stub_def.h").is_file():
        return f"no asc-tools checkout at {tools} (set JAX_LNGB_ASC_TOOLS; its cpudebug headers are needed)"
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        return "no C++ compiler (g++ or $CXX) to run the check with"
    return devkit, tools


CHECKOUTS = _checkouts()


@pytest.mark.skipif(isinstance(CHECKOUTS, str), reason=CHECKOUTS if isinstance(CHECKOUTS, str) else "")
def test_kernel_type_checks_against_cann_headers():
    devkit, tools = CHECKOUTS  # type: ignore[misc]
    proc = subprocess.run(["bash", str(SCRIPT), str(devkit), str(tools)], capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    impls = {"2201": "common", "3510": "3510", "2002": "common"}
    for arch, impl in impls.items():
        assert (
            f"dav-{arch}: 0 errors, 0 warnings in our sources; LayerNormGradBeta from "
            f"layernormgradbeta_{impl}_impl.h" in out
        ), out
    # the probes calling LayerNorm, LayerNormGrad and RmsNorm as the emulation declares them
    for arch, impl in impls.items():
        assert (
            f"dav-{arch}: norm_api_kernels.asc: 0 errors, 0 warnings; LayerNorm/LayerNormGrad/RmsNorm from "
            f"layernorm_{impl}_impl.h layernormgrad_{impl}_impl.h rmsnorm_{impl}_impl.h" in out
        ), out
    assert "6 of 6 deliberate mistakes rejected" in out, out


def test_script_refuses_what_is_not_a_checkout(tmp_path):
    # Runs everywhere: the argument checks need no CANN sources.
    proc = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"'{tmp_path}' is not an asc-devkit checkout (no include/kernel_operator.h)" in proc.stderr
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage:" in proc.stderr
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "kernel_operator.h").write_text("")
    (tmp_path / "impl" / "adv_api").mkdir(parents=True)
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path), str(tmp_path / "none")], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and "is not an asc-tools checkout" in proc.stderr
