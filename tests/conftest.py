"""Shared test helpers: dtypes, random data, error bounds derived from
float32 accumulation (assert_sums_close for finite data; assert_float32_sums
with grad_beta_terms when NaN, Inf, overflow or FTZ/DAZ are in play), and
the hypothesis profiles."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16]
DTYPE_IDS = ["f32", "f16", "bf16"]

U32 = 2.0**-24  # unit roundoff of float32
UNIT_ROUNDOFF = {
    np.dtype(jnp.float32): 2.0**-24,
    np.dtype(jnp.float16): 2.0**-11,
    np.dtype(jnp.bfloat16): 2.0**-8,
}


# Half the smallest subnormal: the absolute rounding error near zero.
HALF_MIN_SUBNORMAL = {
    np.dtype(jnp.float32): 2.0**-150,
    np.dtype(jnp.float16): 2.0**-25,
    np.dtype(jnp.bfloat16): 2.0**-134,
}


def enable_x64():
    """A context manager enabling float64: `jax.enable_x64(True)` where it
    exists (newer jax), else `jax.experimental.enable_x64()` (jax 0.7.2, the
    oldest release we support, has only that one)."""
    import jax

    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64 as experimental_enable_x64

    return experimental_enable_x64()


def unit_roundoff(dtype) -> float:
    return UNIT_ROUNDOFF[np.dtype(dtype)]


def random_array(rng: np.random.Generator, shape, dtype, scale: float = 1.0) -> np.ndarray:
    """Random normals already rounded to `dtype` (returned as that dtype)."""
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)


def assert_sums_close(got, ref, abs_terms_sum, n_terms: int, out_dtype, what: str = "") -> None:
    """Checks a float32-accumulated sum against its float64 reference.

    Each product is rounded once and each of at most n additions once, so the
    accumulation error is at most gamma_{n+1} * sum|terms| (Higham, with
    gamma_k = k u / (1 - k u)); narrowing to out_dtype adds half an ulp of
    the (perturbed) result, or half the smallest subnormal near zero.
    """
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    k = (n_terms + 1) * U32
    acc_err = k / (1 - k) * abs_terms_sum
    bound = acc_err + unit_roundoff(out_dtype) * (np.abs(ref) + acc_err) + HALF_MIN_SUBNORMAL[np.dtype(out_dtype)]
    err = np.abs(got - ref)
    bad = ~(err <= bound)
    assert not bad.any(), (
        f"{what}: {bad.sum()} of {bad.size} values exceed the bound; worst err {err[bad].max()} "
        f"vs bound {bound[bad][np.argmax(err[bad])]}"
    )


def run_python(code: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter with the test's environment.

    The child starts in a neutral folder: `python -c` puts its working
    folder first on sys.path, and from the repository root that would import
    the sources (which lack the compiled extension) instead of the package
    under test.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tempfile.gettempdir(),
    )


def run_bench(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m jax_lngb.bench ARGS`, which must succeed. Run outside the
    source folder: `-m` puts the working directory on sys.path, and the
    sources there lack the compiled extension that the installed package has."""
    cmd = [sys.executable, "-m", "jax_lngb.bench", *args]
    proc = subprocess.run(
        cmd, cwd=tempfile.gettempdir(), env=dict(os.environ), capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def run_bench_section(out: Path, section: str, shapes, dtypes) -> subprocess.CompletedProcess:
    """One benchmark section on tiny shapes (2 reps, 1 warm-up), its JSON
    written to `out`: what the section tests read."""
    return run_bench(
        "--section", section, "--shapes", *shapes, "--dtypes", *dtypes,
        "--reps", "2", "--warmup", "1", "--json", str(out), "--no-progress",
    )  # fmt: skip


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# ------------------------------------------------ non-finite-aware sums

F32_SMALLEST_NORMAL = 2.0**-126


def flush_subnormals(a) -> np.ndarray:
    """float64 copy of `a` widened to float32 with float32 subnormals read as
    (signed) zero: what an input looks like to arithmetic under DAZ."""
    a32 = np.asarray(a).astype(np.float32)
    with np.errstate(invalid="ignore"):
        tiny = np.abs(a32) < F32_SMALLEST_NORMAL
    return np.where(tiny, np.copysign(0.0, a32), a32).astype(np.float64)


def grad_beta_terms(res, dy, groups: int = 0, flush_to_zero: bool = False):
    """float64 [*G, rows, H] terms of pd_gamma (res * dy, exact) and pd_beta
    (dy), the first `groups` axes kept as independent problems."""
    shape = np.shape(res)
    h, lead = shape[-1], shape[:groups]
    rows = int(np.prod(shape[groups:-1], dtype=np.int64))
    widen = flush_subnormals if flush_to_zero else (lambda a: np.asarray(a, np.float64))
    r = widen(res).reshape(*lead, rows, h)
    d = widen(dy).reshape(*lead, rows, h)
    with np.errstate(invalid="ignore"):
        return r * d, d


# Magnitudes from which round-to-nearest gives infinity: the largest finite
# value plus half an ulp.
OVERFLOW_THRESHOLD = {
    np.dtype(jnp.float32): 2.0**128 - 2.0**103,
    np.dtype(jnp.float16): 65520.0,
    np.dtype(jnp.bfloat16): 2.0**128 - 2.0**119,
}


def assert_float32_sums(got, terms, out_dtype, what: str = "", flush_to_zero: bool = False) -> None:
    """Checks float32 sums of `terms` (float64 [..., n, H], exact: products of
    float32-representable values are exact in float64), narrowed once to
    `out_dtype`, against the float64 sums, NaN and Inf included.

    float64 cannot overflow here, but float32 products and partial sums can:
    a column whose sum of magnitudes may reach float32's overflow threshold
    may come out infinite (or NaN, when partials of both signs overflow)
    where the float64 sum is finite. Everywhere else the result must be
    exactly what IEEE arithmetic prescribes:
      * NaN wherever the float64 sum is NaN (a NaN term, inf * 0, inf - inf);
      * the float64 infinity wherever that is infinite;
      * finite and within the accumulation bound (Higham's gamma_{n+1} times
        the sum of magnitudes, plus product underflow, plus the final
        rounding) where it is finite; infinite only if narrowing to
        out_dtype may overflow, and then infinite if it must.

    flush_to_zero: the arithmetic ran with FTZ/DAZ (as XLA's CPU runtime
    sets it): `terms` must then come from inputs already flushed
    (flush_subnormals), and every product and partial sum may additionally
    lose up to the smallest normal float32, 2^-126.
    """
    t = np.asarray(terms, np.float64)
    n = t.shape[-2]
    g = np.asarray(got, np.float64)
    out = np.dtype(out_dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = t.sum(-2)
        mag = np.where(np.isfinite(t), np.abs(t), 0.0).sum(-2)
    nan_term = np.isnan(t).any(-2)
    pos_inf, neg_inf = (t == np.inf).any(-2), (t == -np.inf).any(-2)
    k = (n + 1) * U32
    acc = k / (1 - k) * mag + n * (2.0**-125 if flush_to_zero else 2.0**-149)
    may_overflow = mag * (1 + 2 * k) + acc >= OVERFLOW_THRESHOLD[np.dtype(jnp.float32)] * (1 - 2.0**-20)
    must_nan = nan_term | (pos_inf & neg_inf)
    inf_col = (pos_inf ^ neg_inf) & ~nan_term
    bound = acc + UNIT_ROUNDOFF[out] * (np.abs(ref) + acc) + HALF_MIN_SUBNORMAL[out]
    thr = OVERFLOW_THRESHOLD[out]
    with np.errstate(invalid="ignore"):
        err = np.abs(g - ref)
    close = np.isfinite(g) & (err <= bound)
    # Narrowing may overflow: the sign is the float32 sum's, which is ref's
    # unless the accumulation error could have flipped it.
    sign_ok = (np.sign(g) == np.sign(ref)) | (np.abs(ref) <= acc)
    narrow_inf_ok = np.isinf(g) & sign_ok & (np.abs(ref) + acc >= thr)
    must_be_inf = np.abs(ref) - acc > thr
    ok = np.where(
        must_nan,
        np.isnan(g),
        np.where(
            inf_col,
            (g == ref) | (may_overflow & np.isnan(g)),
            np.where(
                may_overflow,
                ~np.isfinite(g) | close,
                np.where(must_be_inf, narrow_inf_ok, close | narrow_inf_ok),
            ),
        ),
    )
    assert ok.shape == g.shape
    if not ok.all():
        idx = tuple(np.argwhere(~ok)[0])
        raise AssertionError(
            f"{what}: {int((~ok).sum())} of {ok.size} values wrong; first at {idx}: got {g[idx]!r}, "
            f"float64 {ref[idx]!r}, bound {bound[idx]:.3g}, sum|terms| {mag[idx]:.3g}, n {n}, "
            f"nan term {nan_term[idx]}, +inf {pos_inf[idx]}, -inf {neg_inf[idx]}, "
            f"may overflow {may_overflow[idx]}, out {out.name}"
        )


# ------------------------------------------------------ hypothesis profiles

# `dev` by default; `ci` (derandomized: the same examples every run) when CI
# is set; JAX_LNGB_HYPOTHESIS_PROFILE=thorough for a long hunt.
try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is in the test extra; its tests skip without it
    pass
else:
    _common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("dev", max_examples=40, **_common)
    settings.register_profile("ci", max_examples=40, derandomize=True, database=None, print_blob=True, **_common)
    settings.register_profile("thorough", max_examples=1500, **_common)
    settings.load_profile(
        os.environ.get("JAX_LNGB_HYPOTHESIS_PROFILE")
        or ("ci" if os.environ.get("CI", "").lower() not in ("", "0", "false") else "dev")
    )


# ------------------------------------------------------------ parallel runs
#
# pyproject.toml's addopts hand the tests to pytest-xdist workers
# (`-n auto --dist loadfile --no-loadscope-reorder`). A test file is the
# unit a worker takes: its module-scoped fixtures (several start a child
# interpreter or build something) run once, and its jitted functions
# compile once. (Finer units through --dist loadgroup and xdist_group marks
# would be possible, but xdist 3.8 marks a group by editing node ids, which
# pytest 9.2 no longer reads: the groups silently vanish.) This section
# decides how many workers `auto` means and the order the files go out in:
# files holding `slow` tests first, so that no minutes-long test starts
# when the rest of the suite is done. A `huge_memory` test holds a lock
# file while it runs, so two never run at once, from this run or another
# pytest on the machine. Without xdist (`-p no:xdist`) the same options are
# accepted and ignored, and `-n0` runs everything in this process, in file
# order.

# Memory a worker may need at its peak (the JAX runtime, compiled programs,
# test arrays of a few hundred MiB, a child interpreter): `-n auto` starts no
# more workers than the available memory holds.
WORKER_MEMORY = 2 << 30
HUGE_MEMORY_LOCK = "jax_lngb-huge-memory.lock"


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask, lowered by a
    cgroup v2 CPU quota where one is set."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
        if quota != "max":
            cpus = min(cpus, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cpus)


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo, or None where there is none."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per usable CPU, as many as the memory holds; no
    worker process at all (the tests run in this one) when that comes to
    one, or when every argument names single tests (`file.py::test`), where
    starting workers would cost more than it saves."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    if config.args and all("::" in arg for arg in config.args):
        return 0
    workers = usable_cpus()
    mem = available_memory_bytes()
    if mem is not None:
        workers = min(workers, max(1, mem // WORKER_MEMORY))
    return workers if workers > 1 else 0


def pytest_addoption(parser, pluginmanager):
    # addopts name xdist's options; with the plugin blocked (-p no:xdist) or
    # absent they would be rejected as unknown, so stand-ins accept them.
    if pluginmanager.has_plugin("xdist"):
        return
    group = parser.getgroup("xdist-absent", "pytest-xdist options, accepted and ignored: the plugin is not loaded")
    # _addoption: pytest keeps lowercase short options for itself and
    # xdist registers -n the same way.
    group._addoption("-n", "--numprocesses", dest="numprocesses", default=None, help="ignored")
    group.addoption("--dist", dest="dist", default="no", help="ignored")
    group.addoption(
        "--no-loadscope-reorder", dest="loadscopereorder", action="store_false", default=True, help="ignored"
    )


def pytest_collection_modifyitems(config, items):
    # The workers' collections set the order in which files go out (with
    # --no-loadscope-reorder, that of their first tests); a run in one
    # process keeps file order.
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: file order otherwise


@contextlib.contextmanager
def exclusive_lock(path):
    """Holds an exclusive flock on `path` (created if missing) for the body
    of the `with`: across threads, processes and xdist workers alike. Where
    there is no fcntl (not POSIX) it holds nothing."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _one_huge_memory_test_at_a_time(request):
    """A `huge_memory` test runs holding a lock file in the temporary
    folder: two of them at once, from this run or another one on the
    machine, could exhaust its memory (and the test's own check of the
    available memory comes after the lock). Without fcntl (not POSIX) only
    that check stands between them."""
    if request.node.get_closest_marker("huge_memory") is None:
        yield
        return
    with exclusive_lock(os.path.join(tempfile.gettempdir(), HUGE_MEMORY_LOCK)):
        yield


def run_shared_dir(tmp_path_factory) -> Path:
    """A folder that every xdist worker of this run sees, and no other run:
    the run's base temporary folder (the parent of a worker's own)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
