"""jax_lngb.tiling against CANN's own host tiling code, compiled from a local
asc-devkit checkout by cpp/ascend/tools/compare_tiling_with_cann.sh.

Set JAX_LNGB_ASC_DEVKIT to the checkout to run the comparison (about 10 s);
without it only the script's argument handling and the comparison's helpers
are tested.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import jax_lngb

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "cpp/ascend/tools/compare_tiling_with_cann.sh"
COMPARE = ROOT / "cpp/ascend/tools/cann_tiling/compare.py"
DEVKIT = os.environ.get("JAX_LNGB_ASC_DEVKIT", "").strip()
HAVE_CXX = shutil.which(os.environ.get("CXX", "g++")) is not None
APIS = {"LayerNormGradBeta", "LayerNormGrad", "LayerNorm", "RmsNorm"}


def run_script(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHON"] = sys.executable
    # The script's checker must import the jax_lngb these tests import.
    pkg_parent = str(Path(jax_lngb.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.skipif(not DEVKIT, reason="set JAX_LNGB_ASC_DEVKIT to an asc-devkit checkout to compare with CANN")
@pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler (g++ or $CXX) to build CANN's tiling sources with")
def test_every_tiling_field_matches_cann():
    r = run_script(DEVKIT)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    # CANN's sources were compiled as they are in the checkout.
    for name in ("layernorm", "layernorm_grad", "layernorm_grad_beta", "rmsnorm"):
        assert f"compiled unchanged: impl/adv_api/tiling/normalization/{name}_tiling_impl.cpp" in out
    assert "self-check: a one-bit change in any of the 88 fields" in out
    summary_lines = [line for line in r.stdout.splitlines() if line.startswith("SUMMARY ")]
    assert len(summary_lines) == 1, out[-3000:]
    summary = json.loads(summary_lines[0][len("SUMMARY ") :])
    assert summary["ok"] is True
    assert set(summary["apis"]) == APIS
    for name, a in summary["apis"].items():
        assert a["shapes"] >= 12, (name, a)
        assert a["mismatches"] == 0, (name, a)
        assert a["tilings_equal"] >= 12 * 4, (name, a)  # several buffers per shape
        assert a["bounds_equal"] >= a["tilings_equal"], (name, a)
        assert a["rejected_by_both"] >= 4, (name, a)  # the failure cases ran
    fields = {name: a["fields"] for name, a in summary["apis"].items()}
    assert fields == {"LayerNormGradBeta": 20, "LayerNormGrad": 30, "LayerNorm": 26, "RmsNorm": 12}


def test_script_rejects_a_directory_that_is_not_a_devkit(tmp_path):
    r = run_script(str(tmp_path))
    assert r.returncode == 2
    assert "is not an asc-devkit checkout" in r.stderr
    r = run_script()
    assert r.returncode == 2 and "usage:" in r.stderr


def load_compare():
    spec = importlib.util.spec_from_file_location("jax_lngb_compare_tiling", COMPARE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_field_names_map_to_ours():
    cmp = load_compare()
    assert cmp.snake("tmpTensorBSHPos") == "tmp_tensor_bsh_pos"
    assert cmp.snake("originalHLength") == "original_h_length"
    assert cmp.snake("tmpTensor1Size") == "tmp_tensor1_size"
    assert cmp.snake("lastDimValueBackMulTwo") == "last_dim_value_back_mul_two"
    assert cmp.snake("reciprocalOfHLength") == "reciprocal_of_h_length"


def test_cases_cover_every_api_and_flag():
    cmp = load_compare()
    cases = cmp.make_cases()
    for api in ("lngb", "lng", "ln", "rms"):
        mine = [c for c in cases if c.api == api]
        assert len({c.shape_key() for c in mine}) >= 12, api
        assert {c.ts for c in mine} >= {2, 4} and {c.flag for c in mine} == {False, True}, api
        assert any(c.note for c in mine), api  # failure cases
    assert {c.arch for c in cases if c.api == "lng"} == {2002, 2201, 3510}
    # each case travels to the driver as one parseable line
    c = cases[0]
    assert c.line().split()[:2] == [c.api, c.id]
