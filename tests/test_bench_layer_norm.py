"""`python -m jax_lngb.bench --section layer_norm` on tiny shapes: it runs,
reports every pass and implementation, and the accuracy it measures is
within the dtype tolerances. Timings are never asserted."""

from __future__ import annotations

import json
import math

import pytest
from conftest import run_bench_section, torch_available

SHAPES = ["64x128", "3x40x96", "8x1000"]
DTYPES = ["f32", "bf16"]
PASSES = ("fwd", "bwd", "fwd+bwd")


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "ln.json"
    proc = run_bench_section(out, "layer_norm", SHAPES, DTYPES)
    return proc, json.loads(out.read_text())


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
        torch = {"torch", "torch_plain"} if torch_available() else set()
        want = {"ours", "ours_plain", "xla", "xla_plain", "probe"} | torch
        want |= {"ours_chained", "ours_chained_plain"} if p != "fwd" else set()
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
        for name in ("ours", "ours_chained", "xla", "ours_plain", "ours_chained_plain", "xla_plain"):
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


def test_plain_jit_beside_donated(bench):
    # Fresh outputs give the same numbers as donated buffers, bit for bit
    # (same kernel), and the run records that the opt-in was off.
    proc, doc = bench
    assert doc["machine"]["retain_host_memory"]["enabled"] is False
    assert "retain_host_memory: off" in proc.stdout
    for c in doc["cases"]:
        assert c["extra"]["retain_host_memory"] is False
        for name in ("ours", "ours_chained", "xla"):
            if name in c["results"]:
                donated, plain = c["results"][name], c["results"][f"{name}_plain"]
                assert plain["ms"] > 0 and plain["times_ms"]
                assert plain["errors"]["per_output"] == donated["errors"]["per_output"], (c["label"], name)


def _headline_case(dtype, ms, retained):
    from jax_lngb.bench import common

    results = {n: common.ImplResult(n, "", 1, [t], t) for n, t in ms.items()}
    return common.CaseResult(
        f"[65536, 768] {dtype} fwd+bwd",
        (65536, 768),
        dtype,
        5 * 65536 * 768 * 4,
        False,
        {"pass": "fwd+bwd", "retain_host_memory": retained},
        results,
    )


@pytest.mark.parametrize("retained", [True, False])
def test_plain_targets_checked_only_with_the_opt_in(retained):
    from jax_lngb.bench import layer_norm

    case = _headline_case(
        "float32",
        {"ours": 28.0, "ours_plain": 33.0, "xla": 140.0, "xla_plain": 300.0, "torch": 60.0, "torch_plain": 90.0},
        retained,
    )
    by_what = {t.what.split(" (")[0]: t for t in layer_norm.targets([case])}
    near = by_what["[65536, 768] float32 fwd+bwd: ours_plain / ours time"]
    assert near.value == pytest.approx(33 / 28) and near.goal == "<= 1.25"
    xla = by_what["[65536, 768] float32 fwd+bwd: xla_plain / ours_plain time"]
    assert xla.value == pytest.approx(300 / 33) and xla.goal == ">= 8"
    assert near.passed is (True if retained else None) and xla.passed is (True if retained else None)
    bf16 = _headline_case("bfloat16", {"ours": 20.0, "ours_plain": 26.0, "xla_plain": 300.0}, True)
    got = {t.what: t for t in layer_norm.targets([bf16])}
    assert got["[65536, 768] bfloat16 fwd+bwd: ours_plain / ours time"].passed is False  # 1.3 > 1.25
    assert got["[65536, 768] bfloat16 fwd+bwd: xla_plain / ours_plain time"].goal == ">= 12"
