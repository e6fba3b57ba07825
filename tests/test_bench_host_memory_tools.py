"""The allocator comparison (jax_lngb.bench.allocators) and the dx-alias
experiment (jax_lngb.bench.dx_alias) on tiny shapes: they run and report
what they claim to. Timings are never asserted."""

from __future__ import annotations

import json

from conftest import run_python

from jax_lngb.bench import allocators


def test_option_environments():
    base = {"PATH": "/bin", "LD_PRELOAD": "/x.so", "JAX_LNGB_RETAIN_HOST_MEMORY": "1"}
    assert allocators.option_env("glibc", base) == {"PATH": "/bin"}
    assert allocators.option_env("retain", base)["JAX_LNGB_RETAIN_HOST_MEMORY"] == "1"
    assert allocators.option_env("thp", base)["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    for name in ("jemalloc", "tcmalloc"):
        env = allocators.option_env(name, base)
        lib = allocators.find_library(allocators._PRELOADS[name])
        assert (env is None) if lib is None else (env["LD_PRELOAD"] == lib)


def test_summary_and_table():
    case = lambda ms, f: {
        "shape": [8, 4],
        "dtype": "float32",
        "ms": ms,
        "faults_per_call": f,
        "peak_rss_mib": 100.0 + f,
    }
    runs = [
        {"option": "glibc", "impl": "ours", "result": {"cases": [case(3.0, 10)]}},
        {"option": "glibc", "impl": "ours", "result": {"cases": [case(5.0, 30)]}},
        {"option": "glibc", "impl": "ours", "result": {"cases": [case(4.0, 20)]}},
        {"option": "jemalloc", "impl": "ours", "result": "libjemalloc.so.2 not found"},
    ]
    (row,) = allocators.summarize(runs)
    assert (row["ms"], row["ms_min"], row["ms_max"], row["rounds"]) == (4.0, 3.0, 5.0, 3)
    assert row["faults_per_call"] == 20 and row["peak_rss_mib"] == 130.0
    table = allocators.format_table([row], ["glibc", "jemalloc"])
    assert "| [8, 4] float32 | ours | 4.0 ms (3.0-5.0), 20 flt, 130 MiB | - |" in table


def test_allocators_end_to_end_tiny(tmp_path):
    out = tmp_path / "alloc.json"
    code = (
        "import sys; from jax_lngb.bench import allocators; "
        "sys.exit(allocators.main(['--shapes', '64x128', '--dtypes', 'f32', '--rounds', '1', '--reps', '1', "
        f"'--warmup', '1', '--options', 'glibc', 'retain', '--impls', 'ours', '--json', {str(out)!r}]))"
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    got = {r["option"]: r for r in doc["rows"]}
    assert set(got) == {"glibc", "retain"} and all(r["ms"] > 0 for r in got.values())
    retained = [run["result"]["retain_host_memory"] for run in doc["runs"]]
    assert sorted(retained) == [False, True]


def test_dx_alias_findings_tiny():
    code = (
        "import json; from jax_lngb.bench import dx_alias; "
        "print(json.dumps(dx_alias.run((256, 128), reps=1, warmup=1)))"
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    steps = res["steps"]
    # dy kept by the caller: XLA copies it before the aliased call.
    assert steps["dy_param"]["plain"]["copies"] == 0 and steps["dy_param"]["aliased"]["copies"] >= 1
    assert steps["dy_param"]["aliased"]["custom_call_aliases"] is True
    # dy dead after the backward: its temp buffer goes away.
    assert steps["dy_internal"]["aliased"]["temp_bytes"] < steps["dy_internal"]["plain"]["temp_bytes"]
    for by in steps.values():
        assert by["plain"]["ms"] > 0
        # The handler refuses aliased buffers, or runs them to the same bits.
        a = by["aliased"]
        assert "results must not alias" in a.get("error", "") or "ms" in a
    assert all(res.get("bitwise_equal", {}).values())
