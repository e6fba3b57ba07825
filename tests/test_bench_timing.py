"""BenchContext.measure's timing protocol, with made-up implementations that
record when they run: rounds interleave the implementations, a case larger
than the L2 caches waits settle_ms before each timed call (and the wait is
not timed), a case within them does not, and a failing implementation drops
out while the others go on."""

from __future__ import annotations

import time

import pytest

from jax_lngb.bench import common

MIB = 1 << 20


def _recorder(name: str, calls: list, fail_at: int | None = None) -> common.Impl:
    def fn():
        calls.append((name, time.perf_counter()))
        if fail_at is not None and sum(1 for n, _ in calls if n == name) == fail_at:
            raise RuntimeError("made-up failure")
        return ()

    return common.Impl(name, fn)


class _TickingClock:
    """Stands in for time.perf_counter: each reading is 1 us after the one
    before, so the spin in common.settle ends after settle_ms of readings
    and the gaps and times below do not depend on what else the machine
    runs."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1e-6
        return self.now


def _runnable_s() -> float | None:
    """Seconds this thread has spent on a core or queued for one
    (/proc/thread-self/schedstat), or None where the kernel does not say.
    Unlike its CPU time this does not shrink when other processes take the
    cores: a thread that spins is runnable all along, one that sleeps is
    not."""
    try:
        on_cpu, queued, _ = open("/proc/thread-self/schedstat").read().split()
        return (int(on_cpu) + int(queued)) / 1e9
    except (OSError, ValueError):
        return None


def _ctx(**kw) -> common.BenchContext:
    # l3_bytes large: without a probe the label is by size and no eviction
    # buffer is ever allocated.
    base = dict(reps=4, warmup=1, l2_bytes=4 * MIB, l3_bytes=1 << 40)
    base.update(kw)
    return common.BenchContext(**base)


def test_settle_applies_only_beyond_the_l2():
    ctx = _ctx(settle_ms=30)
    assert ctx.settle_s(4 * MIB) == 0.0
    assert ctx.settle_s(4 * MIB + 1) == pytest.approx(0.03)
    assert _ctx(settle_ms=0).settle_s(1 << 30) == 0.0
    # L2 size unknown: every case settles.
    assert _ctx(settle_ms=30, l2_bytes=None).settle_s(1) == pytest.approx(0.03)


@pytest.mark.parametrize("bytes_read, expect_pause", [(64 * MIB, True), (MIB, False)])
def test_pause_before_each_timed_call(bytes_read, expect_pause, monkeypatch):
    monkeypatch.setattr(common.time, "perf_counter", _TickingClock())
    calls: list = []
    ctx = _ctx(settle_ms=40)
    case = ctx.measure("case", (8, 8), "float32", bytes_read, [_recorder("a", calls), _recorder("b", calls)])
    names = [n for n, _ in calls]
    # Warm-up first (one call each), then rounds that alternate a and b.
    assert names == ["a", "b"] + ["a", "b"] * 4
    timed = calls[2:]
    gaps = [t1 - t0 for (_, t0), (_, t1) in zip(timed, timed[1:])]
    if expect_pause:
        assert min(gaps) >= 0.04
    else:
        assert max(gaps) < 0.001  # a few clock readings, no spin
    # The pause happens before the clock starts: the calls themselves are
    # instant.
    for r in case.results.values():
        assert len(r.times_ms) == 4 and max(r.times_ms) < 1


def test_pause_keeps_the_calling_thread_busy(monkeypatch):
    # An idle core came back slowly enough to show in the next call's time,
    # so the pause spins: the thread's CPU time covers the whole wait, and
    # time.sleep is never used for it.
    def no_sleep(_s):
        raise AssertionError("the settle pause slept")

    monkeypatch.setattr(common.time, "sleep", no_sleep)
    ctx = _ctx(settle_ms=30, reps=3)
    runnable, t_cpu = _runnable_s(), time.thread_time()
    case = ctx.measure("case", (8, 8), "float32", 64 * MIB, [_recorder("a", []), _recorder("b", [])])
    # measure() records an implementation's exception as a failure: a sleep
    # in the pause would show up here.
    assert all(r.failed is None for r in case.results.values())
    # 3 rounds x 2 implementations x 30 ms, every one of them runnable. (Its
    # CPU time alone, what a kernel without schedstat leaves to check, is
    # smaller by the share of the cores other processes took.)
    wait = 6 * 0.03
    if runnable is not None:
        assert _runnable_s() - runnable >= 0.9 * wait
    else:
        assert time.thread_time() - t_cpu >= 0.7 * wait


def test_failing_implementation_drops_out():
    calls: list = []
    ctx = _ctx(settle_ms=0)
    case = ctx.measure("case", (8, 8), "float32", 64 * MIB, [_recorder("a", calls), _recorder("b", calls, fail_at=3)])
    assert case.results["b"].failed == "RuntimeError: made-up failure"
    assert case.results["b"].ms is None and case.results["b"].times_ms == []
    assert len(case.results["a"].times_ms) == 4 and case.results["a"].ms is not None
    # b failed in round 2 and was not called again.
    assert [n for n, _ in calls].count("b") == 3
