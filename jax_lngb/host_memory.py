"""Opt-in: keep freed host memory mapped, so a plain `jax.jit` step stops
paying page faults for its fresh output buffers.

A jitted step that donates nothing allocates its [rows, H] outputs afresh on
every call. glibc's malloc serves a block above its mmap threshold (128 KiB
at first, raised dynamically up to 32 MiB) with a fresh anonymous `mmap` and
gives it back with `munmap` on free, so every call faults in and zeroes every
page of every large output again: at [65536, 768] float32 that made a
LayerNorm fwd+bwd several times slower than the kernel itself (figures in
docs/host-memory.md).

`retain_host_memory()` makes glibc keep such memory instead, through three
`mallopt` settings, process-wide and from then on:

* ``M_ARENA_MAX = 1``: every thread allocates from glibc's main arena. XLA
  allocates the buffers of most computations (any with a dot, XLA's own
  autodiff) on its worker threads, and a thread's own arena grows in heaps
  of at most 64 MiB: a larger block there gets a mapping of its own
  whatever the next setting says. Threads that allocated before the call
  keep the arena they have, and arenas that exist by then may be handed to
  later threads: apply it early (the environment variable is earliest).
* ``M_MMAP_MAX = 0``: no block is served by its own `mmap`; large blocks come
  from the heap like small ones, and a freed block goes back to the heap's
  free lists where the next call's allocation of the same size finds it,
  already faulted in.
* ``M_TRIM_THRESHOLD = 2**31 - 1``: the heap's free top is handed back to the
  kernel only beyond 2 GiB (the default gives back anything above 128 KiB,
  or the dynamic threshold, straight away).

Cost: the process's resident memory stays near its peak, and threads that
allocate at the same moment wait for one arena's lock. Memory freed after a
large step remains mapped (and counted in RSS) for the next allocation rather
than returning to the system. Memory the process frees for good only goes
back as the top of the heap beyond 2 GiB, or on an explicit ``malloc_trim``.

Where it does nothing (it then warns once and returns False): a libc other
than glibc (musl, macOS, Windows), and a process whose ``malloc`` is not
glibc's, such as jemalloc or tcmalloc loaded through ``LD_PRELOAD``. Those
allocators keep large blocks by themselves (their figures are in the docs).

Never on by default: it changes allocator behaviour for the whole process,
every library in it included. Turn it on with ``JAX_LNGB_RETAIN_HOST_MEMORY=1``
in the environment (applied when ``jax_lngb`` is imported) or by calling
`retain_host_memory()` before the first large allocation; blocks already
mapped keep the old behaviour until freed.

This module imports nothing heavy (no JAX): ``jax_lngb`` applies the
environment variable before it imports JAX.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

ENV_VAR = "JAX_LNGB_RETAIN_HOST_MEMORY"

# glibc's <malloc.h> parameter numbers.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
M_ARENA_MAX = -8
# The settings applied, in this order. mallopt takes an int, so 2**31 - 1 is
# the largest trim threshold it can set. One arena: XLA allocates the
# buffers of most computations (any with a dot, XLA's own autodiff) on its
# worker threads, and a thread's own glibc arena grows in heaps of at most
# 64 MiB, so a larger block there gets its own mapping whatever M_MMAP_MAX
# says; threads on the main arena take it from the one heap instead.
SETTINGS = {"M_ARENA_MAX": 1, "M_MMAP_MAX": 0, "M_TRIM_THRESHOLD": 2**31 - 1}
_PARAMS = {"M_ARENA_MAX": M_ARENA_MAX, "M_MMAP_MAX": M_MMAP_MAX, "M_TRIM_THRESHOLD": M_TRIM_THRESHOLD}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}

_lock = threading.Lock()
_state: dict[str, Any] = {"enabled": False, "source": None, "reason": "not requested", "warned": False}


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _object_of(lib: ctypes.CDLL, symbol: str) -> str | None:
    """The path of the shared object that `symbol`, as `lib` resolves it,
    lives in (dladdr); None where that cannot be told."""
    try:
        addr = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
        dladdr = lib.dladdr
    except (AttributeError, OSError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    dladdr.restype = ctypes.c_int
    info = _DlInfo()
    if not addr or not dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


def probe() -> dict[str, Any]:
    """What the process's C library and allocator are, and whether
    `retain_host_memory` can act on them: {"applicable": bool, "reason": str,
    "libc": "glibc 2.36" or None, "malloc_from": path or None}."""
    out: dict[str, Any] = {"applicable": False, "reason": "", "libc": None, "malloc_from": None}
    if not sys.platform.startswith("linux"):
        out["reason"] = f"not Linux ({sys.platform}): its C library's malloc has no such settings"
        return out
    try:
        lib = ctypes.CDLL(None)
    except OSError as e:
        out["reason"] = f"cannot open the process's symbols: {e}"
        return out
    try:
        version = lib.gnu_get_libc_version
    except AttributeError:
        out["reason"] = "the C library is not glibc (no gnu_get_libc_version): musl or another libc"
        return out
    version.restype = ctypes.c_char_p
    out["libc"] = "glibc " + version().decode()
    malloc_from = _object_of(lib, "malloc")
    libc_path = _object_of(lib, "gnu_get_libc_version")
    out["malloc_from"] = malloc_from
    if malloc_from is None or libc_path is None:
        out["reason"] = "cannot tell which library provides malloc (no dladdr)"
        return out
    if os.path.realpath(malloc_from) != os.path.realpath(libc_path):
        preload = os.environ.get("LD_PRELOAD")
        out["reason"] = (
            f"malloc comes from {malloc_from}, not glibc ({libc_path})"
            + (f"; LD_PRELOAD={preload}" if preload else "")
            + ": that allocator ignores glibc's mallopt"
        )
        return out
    out["applicable"] = True
    out["reason"] = "glibc malloc"
    return out


def _warn_once(message: str) -> None:
    if not _state["warned"]:
        _state["warned"] = True
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def retain_host_memory() -> bool:
    """Makes glibc's malloc keep freed large blocks mapped for reuse
    (``mallopt(M_ARENA_MAX, 1)``, ``mallopt(M_MMAP_MAX, 0)``,
    ``mallopt(M_TRIM_THRESHOLD, 2**31 - 1)``), process-wide and for the
    rest of the process's life.

    Returns True once the settings are in force (again True on later calls),
    False where they cannot act: a libc other than glibc, or a malloc that
    is not glibc's (jemalloc, tcmalloc in LD_PRELOAD); then it warns once.
    Call it before the first large allocation: blocks mapped before keep
    their own mapping until freed. See the module docstring for its cost."""
    return _apply("call")


def _apply(source: str) -> bool:
    with _lock:
        if _state["enabled"]:
            return True
        found = probe()
        if not found["applicable"]:
            _state["reason"] = found["reason"]
            _warn_once(f"jax_lngb.retain_host_memory() does nothing here: {found['reason']}")
            return False
        lib = ctypes.CDLL(None)
        mallopt = lib.mallopt
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
        failed = [name for name, value in SETTINGS.items() if mallopt(_PARAMS[name], value) != 1]
        if failed:
            _state["reason"] = f"mallopt refused {', '.join(failed)}"
            _warn_once(f"jax_lngb.retain_host_memory() does nothing here: {_state['reason']}")
            return False
        _state.update(
            enabled=True, source=source, reason="glibc malloc: " + ", ".join(f"{k}={v}" for k, v in SETTINGS.items())
        )
        return True


def requested_by_env(environ: dict[str, str] | None = None) -> bool:
    """Whether JAX_LNGB_RETAIN_HOST_MEMORY asks for the opt-in ("1", "true",
    "yes", "on"; unset, "", "0", "false", "no", "off" do not). Any other
    value warns and counts as not asking."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v not in _FALSE:
        warnings.warn(
            f"{ENV_VAR}={value!r} is not understood (use 1 or 0); the opt-in stays off", RuntimeWarning, stacklevel=2
        )
    return False


def apply_env() -> bool:
    """Applies the opt-in when the environment asks for it (called by
    ``import jax_lngb`` before JAX is imported). Returns whether it is on."""
    if requested_by_env():
        return _apply("env")
    return _state["enabled"]


def is_enabled() -> bool:
    """Whether the opt-in is in force in this process."""
    return bool(_state["enabled"])


def status() -> dict[str, Any]:
    """For ``python -m jax_lngb info`` and the benchmark: {"enabled": bool,
    "source": "env" / "call" / None, "env": the variable's value or None,
    "reason": why it is on or off, "settings": the mallopt values applied
    (empty when off), "libc", "malloc_from", "applicable"}."""
    found = probe()
    return {
        "enabled": bool(_state["enabled"]),
        "source": _state["source"],
        "env": os.environ.get(ENV_VAR),
        "reason": _state["reason"]
        if (_state["enabled"] or _state["reason"] != "not requested")
        else "not requested; "
        + (
            "it would apply here: glibc malloc"
            if found["applicable"]
            else "it would do nothing here: " + found["reason"]
        ),
        "settings": dict(SETTINGS) if _state["enabled"] else {},
        "libc": found["libc"],
        "malloc_from": found["malloc_from"],
        "applicable": found["applicable"],
    }


# time_both_ways: the heap counts as settled after this many calls in a row
# faulting fewer pages each (1 MiB: a step's large outputs are tens of MiB),
# trying at most _MAX_SETTLE_CALLS calls.
_SETTLED_CALLS = 3
_SETTLED_FAULTS = 256
_MAX_SETTLE_CALLS = 20


def time_both_ways(call: Callable[[], Any], calls: int = 5, warmup: int = 3) -> dict[str, Any]:
    """Median wall time of `call()` (one plain-jit step that waits for its
    results) without the opt-in, then with it, in this process: for a demo.

    Off first, then it calls `retain_host_memory()` and leaves the opt-in
    on (it cannot be undone). `warmup` untimed calls precede each timing.
    With the opt-in glibc's heap takes a few calls to settle, now and then
    growing once more after two calls without faults (XLA's worker threads
    keep the arenas they had before the opt-in), so the timing with it
    starts only after `_SETTLED_CALLS` warm-up calls in a row fault fewer
    than `_SETTLED_FAULTS` pages each (at most `_MAX_SETTLE_CALLS` more).
    Where the opt-in was already on, or cannot apply, only that one way is
    timed. Page faults are the median over the timed calls, so that one
    call during which the heap still grew does not stand for all of them.
    Returns {"off_ms": float or None, "on_ms": float or None, "enabled":
    bool, "faults_off": per call or None, "faults_on": per call or None,
    "settled": whether the heap settled before the timing with the opt-in
    (None where that was not timed), "reason": str}."""
    import resource
    import statistics
    import time

    def minor_faults() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    def settle() -> bool:
        clean = 0
        for _ in range(_MAX_SETTLE_CALLS):
            f0 = minor_faults()
            call()
            clean = clean + 1 if minor_faults() - f0 < _SETTLED_FAULTS else 0
            if clean == _SETTLED_CALLS:
                return True
        return False

    def timed(settled: bool) -> tuple[float, float]:
        for _ in range(warmup):
            call()
        if settled:
            out["settled"] = settle()
        times, faults = [], []
        for _ in range(max(calls, 1)):
            f0 = minor_faults()
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) * 1e3)
            faults.append(minor_faults() - f0)
        return statistics.median(times), statistics.median(faults)

    out: dict[str, Any] = {"off_ms": None, "on_ms": None, "faults_off": None, "faults_on": None, "settled": None}
    if is_enabled():
        out["on_ms"], out["faults_on"] = timed(settled=True)
        out["reason"] = "the opt-in was already on: timed with it only"
    else:
        out["off_ms"], out["faults_off"] = timed(settled=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            on = retain_host_memory()
        if on:
            out["on_ms"], out["faults_on"] = timed(settled=True)
            out["reason"] = "timed without, then with the opt-in"
        else:
            out["reason"] = "the opt-in cannot apply here: " + (str(caught[0].message) if caught else _state["reason"])
    out["enabled"] = is_enabled()
    return out


def summary(st: dict[str, Any] | None = None) -> str:
    """`status()` as one line, e.g. "on (glibc malloc: M_MMAP_MAX=0,
    M_TRIM_THRESHOLD=2147483647; set by JAX_LNGB_RETAIN_HOST_MEMORY=1)" or
    "off (not requested; it would apply here: glibc malloc)": what `info` and
    the benchmark print."""
    st = status() if st is None else st
    how = {"env": f"; set by {ENV_VAR}={st['env']}", "call": "; set by retain_host_memory()"}.get(
        st["source"] or "", ""
    )
    return f"{'on' if st['enabled'] else 'off'} ({st['reason']}{how})"
