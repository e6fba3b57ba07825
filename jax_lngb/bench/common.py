"""The benchmark framework: timing, results, the streaming-read probe, the
progress line and the report tables that every section shares.

A section (``reduction``, ``layer_norm``) builds its inputs, wraps each
implementation as an `Impl` (a no-argument callable returning its outputs,
already waited for), and hands them to `BenchContext.measure`, which runs
warm-up calls and then times ``reps`` calls of each; the median is the
figure. The section then measures accuracy from the outputs each
implementation's last call left in ``result.outputs`` and reports the case
through ``ctx.on_case``.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TextIO

import numpy as np

from . import residency as _residency
from .residency import FALLBACK_L3_BYTES, Residency

DTYPE_NAMES = {
    "f32": "float32",
    "float32": "float32",
    "f16": "float16",
    "float16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
}
DEFAULT_DTYPES = ("float32", "float16", "bfloat16")
# What one implementation leaves behind slows the next one for a few
# milliseconds more than its call lasts: after XLA's call over [64, 262144]
# float16 (whose float32 temporaries are four times the inputs), the probe
# read the same inputs at half its speed straight away, even after one
# untimed read of them, and at its usual from-memory speed 10-50 ms later;
# the same held for our kernel. A pause before each timed call keeps one
# implementation's aftermath off the next one's time.
DEFAULT_SETTLE_MS = 50.0


def settle(seconds: float) -> None:
    """Waits `seconds` with the calling thread busy on the clock alone.

    Not time.sleep: on a 2-core Zen 4 guest a core left idle for 50 ms took
    about a millisecond to come back up to speed, and that millisecond
    landed on the timed call that followed, on every implementation alike
    ([4096, 4096] float32: our kernel 5.1-5.2 ms and the probe 4.7-4.9 ms
    after a sleep, 4.2 and 4.0-4.1 ms after the same wait spent spinning;
    PyTorch 6.8-7.1 against 4.8-5.1). Reading the clock touches no memory,
    so the write-backs the pause is for still drain."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


# ----------------------------------------------------------- small helpers


def parse_shape(text: str) -> tuple[int, ...]:
    """'65536x768' -> (65536, 768)."""
    try:
        shape = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"bad shape {text!r}: write dimensions joined by 'x', e.g. 65536x768") from None
    if not shape or any(d < 0 for d in shape):
        raise ValueError(f"bad shape {text!r}")
    return shape


def parse_dtype(text: str) -> str:
    """'bf16' -> 'bfloat16'; the canonical NumPy/JAX names pass through."""
    try:
        return DTYPE_NAMES[text.lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {text!r}: use one of f32, f16, bf16") from None


def format_shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def optional_torch() -> Any:
    """PyTorch, when it is installed (it is a peer to compare with, never a
    dependency); None otherwise."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def ready(x: Any) -> Any:
    """Waits until every JAX array in the pytree `x` is computed; returns `x`.

    NumPy arrays and PyTorch CPU tensors are complete when their call
    returns, so they pass through (jax.block_until_ready would try to treat
    them as JAX values)."""
    import jax

    for leaf in jax.tree_util.tree_leaves(x):
        if isinstance(leaf, jax.Array):
            leaf.block_until_ready()
    return x


def ulp(values: np.ndarray, dtype_name: str) -> np.ndarray:
    """The spacing of `dtype_name` at |values| (float64 array).

    bfloat16 is not a NumPy type: its spacing is 2^(floor(log2|v|) - 7)
    (8 significant bits), with zero and subnormals taken at the smallest
    normal number."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    if dtype_name == "bfloat16":
        tiny = 2.0**-126
        return np.exp2(np.floor(np.log2(np.maximum(v, tiny))) - 7)
    dt = np.dtype(dtype_name)
    with np.errstate(over="ignore"):
        return np.spacing(v.astype(dt)).astype(np.float64)


# ---------------------------------------------------- streaming-read probe

STREAM_READ_TARGET = "jax_lngb_stream_read"


@functools.cache
def _stream_read_jit() -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp

    from jax_lngb._core import native as _native

    if STREAM_READ_TARGET not in _native.register_cpu_targets():
        raise RuntimeError(
            f"the compiled extension has no {STREAM_READ_TARGET!r} handler: rebuild it "
            "(pip install . or cpp/dev_build.sh)"
        )

    def probe(*arrays):
        out = jax.ShapeDtypeStruct((2,), jnp.uint32)
        return jax.ffi.ffi_call(STREAM_READ_TARGET, out)(*arrays)

    return jax.jit(probe)


def stream_read(*arrays: Any) -> Any:
    """Reads every byte of `arrays` once with all of XLA's CPU threads (the
    C++ probe kernel behind the ``jax_lngb_stream_read`` custom call).

    Returns uint32[2]: the low and high halves of the wrapping 64-bit sum of
    every array's bytes read as little-endian 64-bit words (the last word of
    each array zero-padded); `words_checksum` computes the same in NumPy."""
    return _stream_read_jit()(*arrays)


def stream_read_checksum(*arrays: Any) -> int:
    """`stream_read` as one Python int."""
    lo, hi = (int(v) for v in np.asarray(stream_read(*arrays)))
    return lo | (hi << 32)


def words_checksum(*arrays: Any) -> int:
    """NumPy reference of the probe's result."""
    total = 0
    for a in arrays:
        raw = np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8)
        pad = -raw.size % 8
        if pad:
            raw = np.concatenate([raw, np.zeros(pad, np.uint8)])
        total += int(raw.view("<u8").sum(dtype=np.uint64))
    return total % (1 << 64)


# ------------------------------------------------------------ result types


@dataclasses.dataclass
class Impl:
    """One implementation of a case: `fn()` runs it once and returns its
    outputs, already waited for. `bytes_read` overrides the case's byte count
    (the probe reads its own bytes)."""

    name: str
    fn: Callable[[], Any]
    note: str = ""
    bytes_read: int | None = None


@dataclasses.dataclass
class ImplResult:
    name: str
    note: str
    bytes_read: int
    times_ms: list[float]
    ms: float | None  # median; None when the implementation failed
    errors: dict[str, Any] = dataclasses.field(default_factory=dict)
    failed: str | None = None
    # The last call's outputs, for the section's accuracy check; the section
    # drops them once it has measured errors.
    outputs: Any = dataclasses.field(default=None, repr=False)

    @property
    def gbps(self) -> float | None:
        if not self.ms:
            return None
        return self.bytes_read / (self.ms * 1e-3) / 1e9


@dataclasses.dataclass
class CaseResult:
    """One shape/dtype (and pass) with every implementation's timing."""

    label: str
    shape: tuple[int, ...]
    dtype: str
    bytes_read: int
    cache_resident: bool
    extra: dict[str, Any]
    results: dict[str, ImplResult]
    # Names of the reference implementations inside `results`.
    ours: str = "ours"
    probe: str = "probe"
    # How `cache_resident` was decided (residency.py).
    residency: Residency | None = None

    def _ms(self, name: str) -> float | None:
        r = self.results.get(name)
        return r.ms if r is not None and r.ms else None

    def vs_ours(self, other: str, ours: str | None = None) -> float | None:
        """time(other) / time(ours): above 1, ours is faster. `ours` names
        another implementation to compare with (default: the case's ours)."""
        t_other, t_ours = self._ms(other), self._ms(self.ours if ours is None else ours)
        if t_other is None or t_ours is None:
            return None
        return t_other / t_ours

    def fraction_of_probe(self, name: str) -> float | None:
        """GB/s of `name` for the case's bytes over the probe's GB/s for its
        own bytes: 1 means streaming the case's bytes at the probe's rate."""
        t = self._ms(name)
        probe = self.results.get(self.probe)
        if t is None or probe is None or probe.gbps is None:
            return None
        if name == self.probe:
            # The probe moves its own bytes (a LayerNorm pass also writes):
            # against itself it is 1 by definition.
            return 1.0
        return (self.bytes_read / (t * 1e-3) / 1e9) / probe.gbps

    def best_vs_ours(self, other: str) -> float | None:
        """The most vs_ours(other) could be: time(other) over the time to move
        the case's bytes at the probe's rate, which no implementation that
        reads its inputs once beats by much. Below a target's goal, the
        target is out of reach on this machine for anyone. That is the
        inverse of other's fraction of the probe."""
        f = self.fraction_of_probe(other) if other != self.probe else None
        return 1 / f if f else None

    def to_json(self) -> dict[str, Any]:
        results = {}
        for name, r in self.results.items():
            results[name] = {
                "ms": r.ms,
                "times_ms": r.times_ms,
                "gbps": r.gbps,
                "fraction_of_probe": self.fraction_of_probe(name),
                "vs_ours": self.vs_ours(name),
                "bytes_read": r.bytes_read,
                "errors": _jsonable(r.errors),
                "note": r.note,
                "failed": r.failed,
            }
        return {
            "label": self.label,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "bytes_read": self.bytes_read,
            "cache_resident": self.cache_resident,
            "residency": self.residency.to_json() if self.residency is not None else None,
            "extra": _jsonable(self.extra),
            "results": results,
        }


@dataclasses.dataclass
class Target:
    """A goal checked on the measured cases; `passed` is None when the
    figure is missing (an implementation was not run)."""

    what: str
    value: float | None
    goal: str
    passed: bool | None
    # For a "peer / ours time" target: the ratio an implementation at the
    # probe's rate would get (CaseResult.best_vs_ours); None elsewhere.
    bound: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "value": _finite_or_none(self.value),
            "goal": self.goal,
            "passed": self.passed,
            "bound": _finite_or_none(self.bound),
        }


def speedup_target(
    case: CaseResult,
    peer: str,
    op: str,
    goal: float,
    ours: str | None = None,
    checked: bool = True,
    why_unchecked: str = "",
) -> Target:
    """`peer / ours time` on one case against `op goal` (">=", ">" or "<="),
    with the bound the machine puts on it (for ">=" and ">"). `ours` names
    the implementation to divide by (default: the case's ours). With
    `checked` False the figure is reported with passed None and
    `why_unchecked` added to its description."""
    if op not in (">=", ">", "<="):
        raise ValueError(f"op must be '>=', '>' or '<=', got {op!r}")
    base = case.ours if ours is None else ours
    v = case.vs_ours(peer, base)
    passed = None if v is None or not checked else (v >= goal if op == ">=" else v > goal if op == ">" else v <= goal)
    bound = case.best_vs_ours(peer) if op != "<=" else None
    what = f"{case.label}: {peer} / {base} time" + (f" ({why_unchecked})" if not checked and why_unchecked else "")
    return Target(what, v, f"{op} {goal:g}", passed, bound)


def _finite_or_none(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _jsonable(x: Any) -> Any:
    """Plain JSON types (NumPy scalars, tuples, non-finite floats made safe)."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float):
        return _finite_or_none(x)
    return x


# ---------------------------------------------------------------- progress


class Progress:
    """One status line on stderr: rewritten in place on a terminal; on a
    pipe or file only forced messages (and at most one other every few
    seconds) become lines, so logs stay short."""

    def __init__(self, enabled: bool, stream: TextIO | None = None, interval_s: float = 5.0):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.interval_s = interval_s
        # None, not 0.0: time.monotonic() counts from boot on Linux, so on a
        # machine up for less than interval_s a zero would swallow the first
        # line.
        self._last: float | None = None
        self._width = 0

    def show(self, label: str, msg: str, force: bool = False) -> None:
        if not self.enabled:
            return
        line = f"{label}: {msg}" if label else msg
        if self.tty:
            pad = max(0, self._width - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._width = len(line)
            self.stream.flush()
            return
        now = time.monotonic()
        if force or self._last is None or now - self._last >= self.interval_s:
            self.stream.write(line + "\n")
            self.stream.flush()
            self._last = now

    def clear(self) -> None:
        """Erases the status line before ordinary output is printed."""
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


# ----------------------------------------------------------------- context


@dataclasses.dataclass
class BenchContext:
    """What a section needs from the command line and the report."""

    shapes: list[tuple[int, ...]] | None = None  # None: the section's defaults
    dtypes: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_DTYPES))
    reps: int = 10
    warmup: int = 2
    impls: set[str] | None = None  # None: every implementation
    seed: int = 0
    l3_bytes: int = FALLBACK_L3_BYTES
    # All L2 caches together (None: unknown), and the bytes read to evict
    # the caches before the probe's evicted calls (None: from the L3 size
    # and the available memory); see residency.py.
    l2_bytes: int | None = None
    evict_bytes: int | None = None
    # Pause before each timed call of a case larger than the L2 caches
    # (see `measure`); 0 times the calls back to back.
    settle_ms: float = DEFAULT_SETTLE_MS
    progress: Progress = dataclasses.field(default_factory=lambda: Progress(False))
    on_case: Callable[[CaseResult], None] | None = None
    _evict_buffer: Any = dataclasses.field(default=None, repr=False)

    def wants(self, name: str) -> bool:
        return self.impls is None or name in self.impls

    def cases(self, section: str, default_shapes: Sequence[tuple[int, ...]]) -> Iterator[tuple[tuple[int, ...], str]]:
        """(shape, dtype name) for every case of a section, shape-major."""
        shapes = self.shapes if self.shapes is not None else list(default_shapes)
        for shape in shapes:
            for dtype in self.dtypes:
                yield tuple(shape), dtype

    def status(self, label: str, msg: str, force: bool = False) -> None:
        self.progress.show(label, msg, force=force)

    def eviction_bytes(self) -> int:
        if self.evict_bytes is None:
            self.evict_bytes = _residency.eviction_bytes(self.l3_bytes, _residency.available_memory())
        return self.evict_bytes

    def _evict(self) -> None:
        """Reads eviction_bytes() of other data with all cores (the probe
        kernel on a buffer kept for the whole run)."""
        if self._evict_buffer is None:
            import jax.numpy as jnp

            self._evict_buffer = ready(jnp.ones((self.eviction_bytes(),), jnp.uint8))
        ready(stream_read(self._evict_buffer))

    def residency(self, label: str, bytes_read: int, probe: Impl | None, probe_ms: float | None) -> Residency:
        """Where the case's inputs came from (residency.py): measured with the
        probe when it ran, unless they fit the L2 caches; by L3 size without
        the probe."""
        sized = _residency.by_size(bytes_read, self.l2_bytes, self.l3_bytes)
        if sized.rule == "l2" or probe is None or not probe_ms:
            return sized
        times = []
        for i in range(_residency.EVICTED_CALLS):
            self.status(label, f"{probe.name} after eviction {i + 1}/{_residency.EVICTED_CALLS}")
            self._evict()
            t0 = time.perf_counter()
            probe.fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return _residency.measured(probe_ms, statistics.median(times))

    def measure(
        self,
        label: str,
        shape: Sequence[int],
        dtype: str,
        bytes_read: int,
        impls: Iterable[Impl],
        extra: dict[str, Any] | None = None,
        probe: str = "probe",
    ) -> CaseResult:
        """Times every implementation on the case: `warmup` untimed calls
        each, then `reps` rounds in which every implementation makes one
        timed call; the median is the figure. Rounds interleave the
        implementations so that a disturbance of a few milliseconds (another
        process, the hypervisor) is shared among them rather than charged
        to whichever ran then. An implementation that raises is reported as
        failed, and the others still run. Then the implementation named
        `probe`, if it ran, is timed after evictions to tell whether the
        case's inputs stayed in cache between calls (`residency`).

        A case larger than the L2 caches waits `settle_ms` before each
        timed call (see DEFAULT_SETTLE_MS): such a case reads from L3 or
        memory, where the previous call's freed temporaries and dirty
        lines cost the next call. Within the L2 caches there is nothing
        of the sort to wait for, and a pause would only let the caches go
        cold."""
        impls = list(impls)
        settle_s = self.settle_s(bytes_read)
        results = {
            impl.name: ImplResult(impl.name, impl.note, self._bytes_of(impl, bytes_read), [], None) for impl in impls
        }
        live: list[Impl] = []
        for impl in impls:
            ok = self._call(label, impl, results[impl.name], range(max(self.warmup, 0)), "warm-up", timed=False)
            if ok:
                live.append(impl)
        # The collector would otherwise pause a timed call now and then.
        gc.collect()
        gc.disable()
        try:
            for i in range(max(self.reps, 1)):
                live = [
                    impl
                    for impl in live
                    if self._call(
                        label, impl, results[impl.name], [i], f"{i + 1}/{self.reps}", timed=True, settle_s=settle_s
                    )
                ]
        finally:
            gc.enable()
        for r in results.values():
            if r.failed is None and r.times_ms:
                r.ms = statistics.median(r.times_ms)
        probe_impl = next((impl for impl in live if impl.name == probe), None)
        # The probe reads the case's inputs (a LayerNorm pass also writes):
        # the L2 rule goes by those bytes.
        where = self.residency(
            label,
            results[probe].bytes_read if probe_impl else int(bytes_read),
            probe_impl,
            results[probe].ms if probe_impl else None,
        )
        return CaseResult(
            label=label,
            shape=tuple(int(d) for d in shape),
            dtype=dtype,
            bytes_read=int(bytes_read),
            cache_resident=where.cache_resident,
            extra=dict(extra or {}),
            results=results,
            probe=probe,
            residency=where,
        )

    def settle_s(self, bytes_read: int) -> float:
        """Seconds to wait before each timed call of a case reading `bytes_read`."""
        if self.settle_ms <= 0 or (self.l2_bytes is not None and bytes_read <= self.l2_bytes):
            return 0.0
        return self.settle_ms / 1e3

    @staticmethod
    def _bytes_of(impl: Impl, case_bytes: int) -> int:
        return int(impl.bytes_read if impl.bytes_read is not None else case_bytes)

    def _call(
        self,
        label: str,
        impl: Impl,
        result: ImplResult,
        steps: Iterable[int],
        what: str,
        timed: bool,
        settle_s: float = 0.0,
    ) -> bool:
        """Runs impl once per step (timing each call when `timed`) and keeps
        its last outputs; False, with the failure recorded, if it raised."""
        try:
            for i in steps:
                self.status(label, f"{impl.name} {what}" if timed else f"{impl.name} {what} {i + 1}/{self.warmup}")
                if settle_s:
                    settle(settle_s)
                t0 = time.perf_counter()
                result.outputs = impl.fn()
                if timed:
                    result.times_ms.append((time.perf_counter() - t0) * 1e3)
        except Exception as e:  # a peer library failing must not end the run
            result.failed = f"{type(e).__name__}: {e}"
            result.times_ms = []
            result.outputs = None
            self.status(label, f"{impl.name} failed: {result.failed}", force=True)
            return False
        return True


# ------------------------------------------------------------------ report


def _fmt(v: float | None, spec: str, missing: str = "-") -> str:
    if v is None:
        return missing
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return format(v, spec)


def _human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def format_case(case: CaseResult) -> str:
    """The table of one case, as printed while the benchmark runs."""
    if case.residency is not None:
        where = case.residency.describe()
    else:
        where = "cache-resident" if case.cache_resident else "from memory"
    lines = [f"{case.label}  ({_human_bytes(case.bytes_read)} read, {where})"]
    for note in case.extra.get("notes", ()):
        lines.append(f"  {note}")
    header = ("impl", "ms", "GB/s", "of probe", "vs ours", "max abs err", "max rel err", "ulps", "note")
    rows = []
    for name, r in case.results.items():
        e = r.errors or {}
        if r.failed:
            rows.append((name, "failed", "", "", "", "", "", "", r.failed[:120]))
            continue
        rows.append(
            (
                name,
                _fmt(r.ms, ".3f"),
                _fmt(r.gbps, ".1f"),
                _fmt(case.fraction_of_probe(name), ".2f"),
                _fmt(case.vs_ours(name), ".2f", "-") + ("x" if case.vs_ours(name) is not None else ""),
                _fmt(e.get("max_abs"), ".2e"),
                _fmt(e.get("max_rel"), ".2e"),
                _fmt(e.get("max_ulps"), ".2f"),
                r.note,
            )
        )
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header) - 1)]
    for row in [header, *rows]:
        cells = [str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  " + "  ".join(cells) + "  " + str(row[-1]))
    return "\n".join(lines)


def format_targets(targets: Sequence[Target]) -> str:
    if not targets:
        return "Targets: none apply to the cases measured."
    lines = ["Targets (PASS / FAIL / n/a when a figure is missing / info when reported, not checked):"]
    for t in targets:
        state = ("n/a " if t.value is None else "info") if t.passed is None else ("PASS" if t.passed else "FAIL")
        bound = "" if t.bound is None else f"; {t.bound:.3g} at the probe's rate"
        lines.append(f"  {state}  {t.what}: {_fmt(t.value, '.4g', 'n/a')} (goal {t.goal}{bound})")
    return "\n".join(lines)
