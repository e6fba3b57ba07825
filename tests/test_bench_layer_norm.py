"""`python -m jax_lngb.bench --section layer_norm` on tiny shapes: it runs,
reports every pass and implementation, and the accuracy it measures is
within the dtype tolerances. Timings are never asserted."""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
import sys

import pytest

SHAPES = ["64x128", "3x40x96", "8x1000"]
DTYPES = ["f32", "bf16"]
PASSES = ("fwd", "bwd", "fwd+bwd")


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "ln.json"
    cmd = [sys.executable, "-m", "jax_lngb.bench", "--section", "layer_norm", "--shapes", *SHAPES,
           "--dtypes", *DTYPES, "--reps", "2", "--warmup", "1", "--json", str(out), "--no-progress"]
    env = dict(os.environ)
    # Run outside the source folder: `-m` puts the working directory on
    # sys.path, and the sources there lack the compiled extension that the
    # installed package has.
    proc = subprocess.run(cmd, cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_every_pass_of_every_case(bench):
    _, doc = bench
    got = [(tuple(c["shape"]), c["dtype"], c["extra"]["pass"]) for c in doc["cases"]]
    names = {"f32": "float32", "bf16": "bfloat16"}
    want = [(tuple(int(d) for d in s.split("x")), names[t], p) for s in SHAPES for t in DTYPES for p in PASSES]
    assert got == want


def test_implementations_and_bytes(bench):
    _, doc = bench
    for c in doc["cases"]:
        p = c["extra"]["pass"]
        want = {"ours", "xla", "probe"} | ({"torch"} if _torch_available() else set())
        want |= {"ours_chained"} if p != "fwd" else set()
        want |= {"xla_stream"} if p != "fwd+bwd" else set()
        assert set(c["results"]) == want, (c["label"], set(c["results"]))
        item = 4 if c["dtype"] == "float32" else 2
        moved = {"fwd": 2, "bwd": 3, "fwd+bwd": 5}[p]
        assert c["bytes_read"] == moved * math.prod(c["shape"]) * item
        assert c["results"]["probe"]["bytes_read"] == 2 * math.prod(c["shape"]) * item


def test_accuracy_of_every_implementation(bench):
    _, doc = bench
    tol = {"float32": 1e-4, "bfloat16": 1.6e-2}
    outputs = {"fwd": {"y"}, "bwd": {"dx", "dgamma", "dbeta"}, "fwd+bwd": {"y", "dx", "dgamma", "dbeta"}}
    for c in doc["cases"]:
        for name in ("ours", "ours_chained", "xla"):
            if name not in c["results"]:
                continue
            e = c["results"][name]["errors"]
            assert set(e["per_output"]) == outputs[c["extra"]["pass"]]
            assert 0 <= e["max_rel"] <= tol[c["dtype"]], (c["label"], name, e)
        for name in ("probe", "xla_stream"):
            if name in c["results"]:
                assert c["results"][name]["errors"] == {}


def test_targets_are_reported(bench):
    proc, doc = bench
    whats = [t["what"] for t in doc["targets"]]
    assert any("ours max error" in w for w in whats)
    assert any(w.startswith("every case: xla / ours time") for w in whats)
    for t in doc["targets"]:
        if "max error" in t["what"]:
            assert t["passed"] is True, t
    for c in doc["cases"]:
        assert c["label"] in proc.stdout
