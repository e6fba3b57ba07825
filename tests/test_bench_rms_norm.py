"""`python -m jax_lngb.bench --section rms_norm` on tiny shapes: it runs,
reports every pass and implementation, its targets, and the accuracy it
measures is within the dtype tolerances. Timings are never asserted."""

from __future__ import annotations

import json

import pytest
from conftest import run_bench_section, torch_available

SHAPES = ["64x128", "3x40x96"]
DTYPES = ["f32", "bf16"]
PASSES = ("fwd", "bwd", "fwd+bwd")


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "rms.json"
    run_bench_section(out, "rms_norm", SHAPES, DTYPES)
    return json.loads(out.read_text())


def test_every_case_pass_and_implementation(doc):
    names = {"f32": "float32", "bf16": "bfloat16"}
    got = [(tuple(c["shape"]), c["dtype"], c["extra"]["pass"]) for c in doc["cases"]]
    assert got == [(tuple(int(d) for d in s.split("x")), names[t], p) for s in SHAPES for t in DTYPES for p in PASSES]
    for c in doc["cases"]:
        p = c["extra"]["pass"]
        want = {"ours", "xla", "probe"} | ({"torch"} if torch_available() else set())
        want |= {"ours_chained"} if p != "fwd" else set()
        want |= {"ours_jit", "xla_jit"} if p == "fwd+bwd" else set()
        assert set(c["results"]) == want, (c["label"], set(c["results"]))
        for name, r in c["results"].items():
            assert r["failed"] is None and r["ms"] > 0, (c["label"], name, r["failed"])
        item = 4 if c["dtype"] == "float32" else 2
        moved = {"fwd": 2, "bwd": 3, "fwd+bwd": 4}[p]
        assert c["bytes_read"] == moved * item * c["extra"]["rows"] * c["extra"]["cols"]


def test_accuracy_within_tolerance(doc):
    tol = {"float32": 1e-4, "bfloat16": 1.6e-2}
    for c in doc["cases"]:
        for name in ("ours", "ours_chained", "ours_jit", "xla", "torch"):
            r = c["results"].get(name)
            if r is None:
                continue
            outs = r["errors"]["per_output"]
            assert (
                set(outs)
                == {"fwd": {"y"}, "bwd": {"dx", "dgamma"}, "fwd+bwd": {"y", "dx", "dgamma"}}[c["extra"]["pass"]]
            )
            assert r["errors"]["max_rel"] <= tol[c["dtype"]], (c["label"], name, r["errors"])


def test_targets_only_at_the_headline_shape(doc):
    # Off the headline shape only the accuracy targets apply.
    whats = [t["what"] for t in doc["targets"]]
    assert whats and all(w.startswith("every case:") for w in whats), whats
    assert all(t["passed"] for t in doc["targets"]), doc["targets"]
