"""`python -m jax_lngb.bench` (the reduction section, the framework and the
streaming-read probe) on tiny shapes: it runs, reports every implementation
with the right byte counts, ours is as accurate as rounding the exact sums
allows, and the probe provably reads every byte. Timings are never asserted."""

from __future__ import annotations

import io
import json
import math
import os

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import run_bench, torch_available

from jax_lngb.bench import common
from jax_lngb.bench.__main__ import _THP_ENABLED

SHAPES = ["64x128", "3x40x96", "8x1000"]
DTYPES = ["f32", "bf16", "f16"]
NAMES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}
# max |error| / max |sum| for the peers that accumulate in float32.
TOLERANCE = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}


def _matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    out, png = tmp / "red.json", tmp / "red.png"
    proc = run_bench(
        "--shapes",
        *SHAPES,
        "--dtypes",
        *DTYPES,
        "--reps",
        "2",
        "--warmup",
        "1",
        "--json",
        str(out),
        "--png",
        str(png),
        "--no-progress",
        timeout=600,
    )
    return proc, json.loads(out.read_text()), png


def test_transparent_hugepages_mode(tmp_path):
    from jax_lngb.bench.__main__ import transparent_hugepages

    f = tmp_path / "enabled"
    f.write_text("always [madvise] never\n")
    assert transparent_hugepages(str(f)) == "madvise"
    f.write_text("[always] madvise never\n")
    assert transparent_hugepages(str(f)) == "always"
    f.write_text("garbage\n")
    assert transparent_hugepages(str(f)) is None
    assert transparent_hugepages(str(tmp_path / "missing")) is None


def test_document_structure(bench):
    proc, doc, _ = bench
    assert set(doc) >= {"machine", "args", "cases", "targets"}
    m = doc["machine"]
    for key in ("cpu", "cores", "l3_bytes", "jax", "jaxlib", "numpy", "torch", "isa"):
        assert key in m
    assert m["isa"] in ("generic", "avx2", "avx512")
    # OpenMP threads wait passively unless the caller chose otherwise (a
    # spinning torch pool would slow whatever is timed after it).
    assert m["omp_wait_policy"] == os.environ.get("OMP_WAIT_POLICY", "PASSIVE")
    assert f"OpenMP wait policy {m['omp_wait_policy']}" in proc.stdout
    # Whether large buffers may get huge pages: it moves the peers' times.
    assert m["glibc_tunables"] == os.environ.get("GLIBC_TUNABLES")
    if os.path.exists(_THP_ENABLED):
        assert m["transparent_hugepages"] in ("always", "madvise", "never")
        assert f"transparent huge pages: {m['transparent_hugepages']}" in proc.stdout
    assert doc["args"]["section"] == "reduction" and doc["args"]["reps"] == 2
    got = [(tuple(c["shape"]), c["dtype"]) for c in doc["cases"]]
    want = [(tuple(int(d) for d in s.split("x")), NAMES[t]) for s in SHAPES for t in DTYPES]
    assert got == want
    for c in doc["cases"]:
        assert c["label"] in proc.stdout
        for r in c["results"].values():
            assert set(r) >= {"ms", "times_ms", "gbps", "fraction_of_probe", "vs_ours", "bytes_read", "errors", "note"}
            assert r["failed"] is None, r
            assert len(r["times_ms"]) == 2 and r["ms"] > 0 and r["gbps"] > 0
    assert "Targets" in proc.stdout


def test_implementations_and_bytes(bench):
    _, doc, _ = bench
    want = {"ours", "xla", "numpy", "probe"} | ({"torch"} if torch_available() else set())
    for c in doc["cases"]:
        assert set(c["results"]) == want, (c["label"], set(c["results"]))
        nbytes = 2 * math.prod(c["shape"]) * ITEMSIZE[c["dtype"]]
        assert c["bytes_read"] == nbytes
        for r in c["results"].values():
            assert r["bytes_read"] == nbytes
        assert c["results"]["ours"]["vs_ours"] == 1.0
        probe = c["results"]["probe"]
        assert probe["fraction_of_probe"] == pytest.approx(1.0)
        assert probe["errors"] == {}


def _check_residency(c: dict, l2_total: int | None, l3: int) -> dict:
    r = c["residency"]
    assert r["rule"] in ("measured", "l2", "l3"), r
    assert r["cache_resident"] == c["cache_resident"]
    if r["rule"] == "l2":
        assert l2_total is not None and c["results"]["probe"]["bytes_read"] <= l2_total
        assert c["cache_resident"] is True
    elif r["rule"] == "l3":
        assert "probe" not in c["results"] or (l2_total is not None and c["bytes_read"] > l2_total)
        assert c["cache_resident"] == (c["bytes_read"] <= l3)
    else:
        assert r["probe_ms"] == c["results"]["probe"]["ms"]
        assert r["evicted_probe_ms"] > 0
        assert r["speedup"] == pytest.approx(r["evicted_probe_ms"] / r["probe_ms"])
        assert c["cache_resident"] == (r["speedup"] >= r["threshold"])
    return r


def test_cache_resident_labels(bench):
    # The tiny cases fit the L2 caches wherever sysfs says how large they
    # are; otherwise they are measured.
    proc, doc, _ = bench
    m = doc["machine"]
    assert m["l3_bytes"] > 0 and m["eviction_bytes"] >= 64 << 20
    for c in doc["cases"]:
        r = _check_residency(c, m["l2_total_bytes"], m["l3_bytes"])
        if m["l2_total_bytes"] is not None and m["l2_total_bytes"] >= 1 << 20:
            assert r["rule"] == "l2", c["label"]
            assert "fits the L2 caches" in proc.stdout
    assert "cache-resident = the probe, timed among the others" in proc.stdout


def test_residency_measured_beyond_the_l2(tmp_path):
    # 32 MiB of inputs: more than any 2-core machine's L2s, so the probe is
    # timed again after an eviction and the label follows the two medians.
    out = tmp_path / "big.json"
    proc = run_bench(
        "--shapes",
        "2048x2048",
        "--dtypes",
        "f32",
        "--reps",
        "3",
        "--warmup",
        "1",
        "--impls",
        "ours",
        "probe",
        "--json",
        str(out),
        "--no-progress",
        timeout=600,
    )
    doc = json.loads(out.read_text())
    m = doc["machine"]
    (c,) = doc["cases"]
    r = _check_residency(c, m["l2_total_bytes"], m["l3_bytes"])
    if m["l2_total_bytes"] is not None and m["l2_total_bytes"] >= c["bytes_read"]:
        assert r["rule"] == "l2"
    else:
        assert r["rule"] == "measured"
        assert "x its speed after an eviction" in proc.stdout


def test_residency_by_l3_size_without_the_probe(tmp_path):
    out = tmp_path / "noprobe.json"
    proc = run_bench(
        "--shapes",
        "1024x1024",
        "--dtypes",
        "f32",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--impls",
        "ours",
        "xla",
        "--json",
        str(out),
        "--no-progress",
        timeout=600,
    )
    doc = json.loads(out.read_text())
    m = doc["machine"]
    (c,) = doc["cases"]
    r = _check_residency(c, m["l2_total_bytes"], m["l3_bytes"])
    if m["l2_total_bytes"] is None or c["bytes_read"] > m["l2_total_bytes"]:
        assert r["rule"] == "l3" and "by L3 size" in proc.stdout


def test_accuracy(bench):
    _, doc, _ = bench
    for c in doc["cases"]:
        for name in ("ours", "xla", "numpy"):
            e = c["results"][name]["errors"]
            assert set(e["per_output"]) == {"pd_gamma", "pd_beta"}
            assert 0 <= e["max_rel"] <= TOLERANCE[c["dtype"]], (c["label"], name, e)
        # Ours is the exact sum rounded once, up to float32 accumulation.
        assert c["results"]["ours"]["errors"]["vs_rounding"] <= 1, c["label"]
        if "torch" in c["results"]:
            assert c["results"]["torch"]["errors"]["max_abs"] >= 0


def test_targets(bench):
    _, doc, _ = bench
    whats = [t["what"] for t in doc["targets"]]
    assert any(w.startswith("every case: xla / ours time") for w in whats)
    assert any(w.startswith("every case: numpy / ours time") for w in whats)
    for t in doc["targets"]:
        assert set(t) == {"what", "value", "goal", "passed", "bound"}
        if "error" in t["what"]:
            assert t["passed"] is True, t


def _headline_case(dtype: str, ms: dict[str, float]) -> common.CaseResult:
    # [65536, 768] with made-up medians: the probe reads the case's bytes.
    n = 65536 * 768 * 2 * ITEMSIZE[dtype]
    results = {name: common.ImplResult(name, "", n, [t], t) for name, t in ms.items()}
    return common.CaseResult(f"[65536, 768] {dtype}", (65536, 768), dtype, n, False, {}, results)


def test_speedup_targets_carry_what_the_probe_allows():
    from jax_lngb.bench import reduction

    # A peer at 8.3 ms and a probe at 5.9 ms: even an implementation at the
    # probe's rate is only 8.3 / 5.9 = 1.41x faster, so the 1.8x target fails
    # and says it could not have passed.
    case = _headline_case("float16", {"ours": 6.0, "probe": 5.9, "xla": 180.0, "torch": 8.3})
    by_what = {t.what: t for t in reduction.targets([case])}
    torch_t = by_what["[65536, 768] float16: torch / ours time"]
    assert torch_t.value == pytest.approx(8.3 / 6.0) and torch_t.passed is False
    assert torch_t.bound == pytest.approx(8.3 / 5.9)
    xla_t = by_what["[65536, 768] float16: xla / ours time"]
    assert xla_t.passed is True and xla_t.bound == pytest.approx(180.0 / 5.9)
    # Targets that are not a peer's speed-up have no bound.
    assert by_what["[65536, 768] float16: ours fraction of the probe"].bound is None
    text = common.format_targets(list(by_what.values()))
    assert "torch / ours time: 1.383 (goal >= 1.8; 1.41 at the probe's rate)" in text
    assert torch_t.to_json()["bound"] == pytest.approx(8.3 / 5.9)


def test_speedup_target_without_a_probe_or_peer():
    case = _headline_case("float32", {"ours": 12.0, "xla": 24.0})
    t = common.speedup_target(case, "xla", ">=", 1.8)
    assert t.passed is True and t.bound is None
    missing = common.speedup_target(case, "torch", ">", 1)
    assert missing.value is None and missing.passed is None and missing.goal == "> 1"
    with pytest.raises(ValueError, match="op must be"):
        common.speedup_target(case, "xla", "<", 1)


def test_from_memory_target_is_listed_even_without_such_a_case(bench):
    # The tiny cases above stay in cache: the target is then n/a, not absent.
    _, doc, _ = bench
    (t,) = [t for t in doc["targets"] if t["what"].startswith("every case from memory")]
    if all(c["cache_resident"] for c in doc["cases"]):
        assert t["value"] is None and t["passed"] is None
        assert "none: every case stayed in cache" in t["what"]
    else:
        assert t["value"] > 0 and t["passed"] is (t["value"] <= 1.2)


def test_png_or_clear_message(bench):
    proc, _, png = bench
    if _matplotlib_available():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert not png.exists()
        assert "matplotlib is not installed" in proc.stderr


def test_threads_and_impl_selection(tmp_path):
    out = tmp_path / "t.json"
    run_bench(
        "--shapes",
        "16x64",
        "--dtypes",
        "bf16",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--threads",
        "1",
        "--impls",
        "ours",
        "probe",
        "--json",
        str(out),
        "--no-progress",
        timeout=600,
    )
    doc = json.loads(out.read_text())
    assert doc["machine"]["xla_threads"] == 1
    (case,) = doc["cases"]
    assert set(case["results"]) == {"ours", "probe"}
    assert case["results"]["ours"]["vs_ours"] == 1.0


# ------------------------------------------------------ the probe in-process


@pytest.mark.parametrize(
    "arrays",
    [
        lambda rng: (
            rng.standard_normal((64, 128)).astype(np.float32),
            rng.standard_normal((64, 128)).astype(np.float32),
        ),
        lambda rng: (jnp.asarray(rng.standard_normal((3, 5))).astype(jnp.bfloat16),),
        lambda rng: (rng.integers(-128, 127, 13, dtype=np.int8), rng.standard_normal(7).astype(np.float16)),
        # Several tasks (more than 1 MiB), odd sizes, three buffers of three dtypes.
        lambda rng: (
            rng.standard_normal(3 * 2**18 + 5).astype(np.float32),
            rng.standard_normal((1001, 517)).astype(np.float16),
            rng.integers(0, 2**31, 2**20 + 3, dtype=np.int32),
        ),
        lambda rng: (np.zeros((0, 8), np.float32), np.ones(3, np.float32)),
    ],
    ids=["f32_pair", "bf16", "int8_f16_tails", "large_three", "empty"],
)
def test_probe_reads_every_byte(arrays):
    arrs = arrays(np.random.default_rng(0))
    assert common.stream_read_checksum(*arrs) == common.words_checksum(*arrs)
    out = common.stream_read(*arrs)
    assert out.shape == (2,) and out.dtype == jnp.uint32


def test_probe_changes_with_any_byte():
    a = np.arange(100_003, dtype=np.uint8)
    base = common.stream_read_checksum(a)
    for i in (0, 63, 64, 50_000, 100_002):
        b = a.copy()
        b[i] ^= 1
        assert common.stream_read_checksum(b) != base, i


# ------------------------------------------------------------- helpers


def test_ulp():
    assert common.ulp(np.array([1.0]), "float32")[0] == 2.0**-23
    assert common.ulp(np.array([1.0]), "float16")[0] == 2.0**-10
    assert common.ulp(np.array([1.0, -3.0]), "bfloat16").tolist() == [2.0**-7, 2.0**-6]
    assert common.ulp(np.array([0.0]), "bfloat16")[0] == 2.0**-133


def test_parse_options():
    assert common.parse_shape("3x40x96") == (3, 40, 96)
    assert common.parse_dtype("BF16") == "bfloat16"
    with pytest.raises(ValueError):
        common.parse_shape("64by128")
    with pytest.raises(ValueError):
        common.parse_dtype("f64")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line():
    tty = _Tty()
    p = common.Progress(True, tty)
    p.show("case", "ours 1/10")
    p.show("case", "x")
    p.clear()
    assert tty.getvalue().startswith("\rcase: ours 1/10\rcase: x")
    assert "\n" not in tty.getvalue()
    pipe = io.StringIO()
    q = common.Progress(True, pipe, interval_s=3600)
    q.show("case", "first")
    q.show("case", "skipped")
    q.show("case", "forced", force=True)
    assert pipe.getvalue().splitlines() == ["case: first", "case: forced"]
