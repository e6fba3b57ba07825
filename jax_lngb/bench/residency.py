"""Whether a benchmark case's inputs come from cache or from memory.

The bandwidth target "no more than 1.2x slower than the probe where data is
not cache-resident" needs that label, and the size of the L3 alone gets it
wrong both ways. A virtual machine may report its host's whole L3 (480 MiB
on one cloud Xeon guest) while the guest's share is far smaller, so every
case "fits"; and the peers timed between two calls of one implementation
(NumPy widening a 16-bit copy, PyTorch's workspace, XLA's float32 copy)
push inputs much smaller than the L3 out of it before the next call.

So the label is measured where it can be: the probe's median among the
other implementations (the conditions every figure of the case was taken
in) against its median right after reading `eviction_bytes` of other data.
Inputs that survive in cache between calls are read clearly faster than
after the eviction; inputs that do not are read at the same speed. Inputs
that fit the cores' L2 caches are called resident by size: a read of a few
MiB is dominated by a call's fixed costs, and the two times no longer say
where the bytes came from. Without the probe (``--impls`` leaving it out),
the label falls back to the L3 size.

The sysfs readers here only need Linux; elsewhere the L3 is taken as 32 MiB
and the L2 rule is skipped.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

# The probe must be at least this much faster among the others than after
# an eviction for the case to count as cache-resident. Run to run, the
# probe's median moves by 5-10% on a shared 2-core guest.
RESIDENT_SPEEDUP = 1.15
# Probe calls timed after an eviction; the median is the figure.
EVICTED_CALLS = 3
# Bytes read to evict the caches: twice the L3 (a victim L3 keeps what the
# L2s drop, so one L3's worth can leave part of a case in place), at least
# this much, at most an eighth of the available memory.
MIN_EVICTION_BYTES = 64 << 20
# L3 size used when the machine does not say.
FALLBACK_L3_BYTES = 32 << 20

_SYSFS_CPU = "/sys/devices/system/cpu"


def _parse_size(text: str) -> int:
    """'48K', '2048K', '491520K', '32M', '1G' or a plain byte count."""
    text = text.strip()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def cache_instances(level: int, root: str = _SYSFS_CPU) -> dict[str, int]:
    """{shared_cpu_list: bytes} for every distinct data or unified cache of
    `level` the machine's CPUs see (an instruction cache is left out); empty
    when sysfs does not say."""
    found: dict[str, int] = {}
    try:
        cpus = sorted(e for e in os.listdir(root) if e.startswith("cpu") and e[3:].isdigit())
    except OSError:
        return found
    for cpu in cpus:
        base = os.path.join(root, cpu, "cache")
        try:
            entries = sorted(os.listdir(base))
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(base, entry)
            lvl, size, kind = (
                _read(os.path.join(path, "level")),
                _read(os.path.join(path, "size")),
                _read(os.path.join(path, "type")),
            )
            if lvl is None or size is None or kind == "Instruction":
                continue
            try:
                if int(lvl) != level:
                    continue
                nbytes = _parse_size(size)
            except ValueError:
                continue
            shared = _read(os.path.join(path, "shared_cpu_list")) or f"{cpu}/{entry}"
            found[shared] = nbytes
    return found


def l3_bytes(root: str = _SYSFS_CPU) -> int:
    """Size of the L3 cpu0 sees (32 MiB when the machine does not say)."""
    caches = cache_instances(3, root)
    if not caches:
        return FALLBACK_L3_BYTES
    cpu0 = [n for shared, n in caches.items() if _lists_cpu0(shared)]
    return cpu0[0] if cpu0 else max(caches.values())


def _lists_cpu0(shared: str) -> bool:
    for part in shared.split(","):
        lo, _, hi = part.partition("-")
        try:
            if int(lo) <= 0 <= int(hi or lo):
                return True
        except ValueError:
            continue
    return False


def l2_total_bytes(root: str = _SYSFS_CPU) -> int | None:
    """All L2 caches together (each distinct instance once); None when
    sysfs does not say."""
    caches = cache_instances(2, root)
    return sum(caches.values()) if caches else None


def available_memory(meminfo: str = "/proc/meminfo") -> int | None:
    text = _read(meminfo)
    for line in (text or "").splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            try:
                return int(parts[1]) * (1024 if parts[-1].lower() == "kb" else 1)
            except (IndexError, ValueError):
                return None
    return None


def eviction_bytes(l3: int, available: int | None) -> int:
    n = max(2 * l3, MIN_EVICTION_BYTES)
    if available:
        n = min(n, max(MIN_EVICTION_BYTES, available // 8))
    return n


@dataclasses.dataclass(frozen=True)
class Residency:
    """Where a case's inputs came from, and by which rule that was decided:
    ``measured`` (probe among the others vs after an eviction), ``l2``
    (they fit the L2 caches) or ``l3`` (no probe: bytes <= L3)."""

    cache_resident: bool
    rule: str
    probe_ms: float | None = None
    evicted_probe_ms: float | None = None

    @property
    def speedup(self) -> float | None:
        """Probe time after an eviction over the probe time among the others."""
        if not self.probe_ms or not self.evicted_probe_ms:
            return None
        return self.evicted_probe_ms / self.probe_ms

    def describe(self) -> str:
        where = "cache-resident" if self.cache_resident else "from memory"
        if self.rule == "measured":
            return f"{where}: probe {self.speedup:.2f}x its speed after an eviction"
        if self.rule == "l2":
            return f"{where}: fits the L2 caches"
        return f"{where} by L3 size"

    def to_json(self) -> dict[str, Any]:
        return {
            "cache_resident": self.cache_resident,
            "rule": self.rule,
            "probe_ms": self.probe_ms,
            "evicted_probe_ms": self.evicted_probe_ms,
            "speedup": self.speedup,
            "threshold": RESIDENT_SPEEDUP if self.rule == "measured" else None,
        }


def by_size(bytes_read: int, l2_total: int | None, l3: int) -> Residency:
    if l2_total is not None and bytes_read <= l2_total:
        return Residency(True, "l2")
    return Residency(bytes_read <= l3, "l3")


def measured(probe_ms: float, evicted_probe_ms: float) -> Residency:
    return Residency(evicted_probe_ms >= RESIDENT_SPEEDUP * probe_ms, "measured", probe_ms, evicted_probe_ms)
