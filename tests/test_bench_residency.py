"""The benchmark's cache-residency helpers (jax_lngb/bench/residency.py) on
a made-up sysfs tree and meminfo: cache sizes per level and instance, the
eviction size's bounds, and the measured label's rule."""

from __future__ import annotations

import pytest

from jax_lngb.bench import residency


def _cache(root, cpu: int, index: int, level: int, kind: str, size: str, shared: str) -> None:
    d = root / f"cpu{cpu}" / "cache" / f"index{index}"
    d.mkdir(parents=True)
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")
    (d / "shared_cpu_list").write_text(f"{shared}\n")


@pytest.fixture
def sysfs(tmp_path):
    # Two cores, private L1s and L2s, one shared L3; plus a non-cpu entry.
    for cpu in (0, 1):
        _cache(tmp_path, cpu, 0, 1, "Data", "48K", str(cpu))
        _cache(tmp_path, cpu, 1, 1, "Instruction", "32K", str(cpu))
        _cache(tmp_path, cpu, 2, 2, "Unified", "2048K", str(cpu))
        _cache(tmp_path, cpu, 3, 3, "Unified", "32M", "0-1")
    (tmp_path / "cpufreq").mkdir()
    return str(tmp_path)


def test_parse_size():
    assert residency._parse_size("48K") == 48 << 10
    assert residency._parse_size("491520K") == 480 << 20
    assert residency._parse_size("32M") == 32 << 20
    assert residency._parse_size("1G") == 1 << 30
    assert residency._parse_size("4096") == 4096
    with pytest.raises(ValueError):
        residency._parse_size("big")


def test_cache_instances_count_each_shared_cache_once(sysfs):
    assert residency.cache_instances(1, sysfs) == {"0": 48 << 10, "1": 48 << 10}
    assert residency.cache_instances(2, sysfs) == {"0": 2 << 20, "1": 2 << 20}
    assert residency.cache_instances(3, sysfs) == {"0-1": 32 << 20}
    assert residency.l2_total_bytes(sysfs) == 4 << 20
    assert residency.l3_bytes(sysfs) == 32 << 20


def test_l3_of_cpu0_when_there_are_several(tmp_path):
    _cache(tmp_path, 0, 0, 3, "Unified", "16M", "0-3")
    _cache(tmp_path, 4, 0, 3, "Unified", "32M", "4-7")
    assert residency.l3_bytes(str(tmp_path)) == 16 << 20


def test_missing_or_broken_sysfs(tmp_path):
    assert residency.cache_instances(2, str(tmp_path / "nothing")) == {}
    assert residency.l2_total_bytes(str(tmp_path / "nothing")) is None
    assert residency.l3_bytes(str(tmp_path / "nothing")) == residency.FALLBACK_L3_BYTES
    _cache(tmp_path, 0, 0, 3, "Unified", "lots", "0")  # unreadable size: ignored
    assert residency.l3_bytes(str(tmp_path)) == residency.FALLBACK_L3_BYTES


def test_available_memory(tmp_path):
    f = tmp_path / "meminfo"
    f.write_text("MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n")
    assert residency.available_memory(str(f)) == 20000000 * 1024
    f.write_text("MemTotal: 1 kB\n")
    assert residency.available_memory(str(f)) is None
    assert residency.available_memory(str(tmp_path / "missing")) is None


def test_eviction_bytes_bounds():
    mib = 1 << 20
    assert residency.eviction_bytes(32 * mib, None) == 64 * mib
    assert residency.eviction_bytes(480 * mib, 24 << 30) == 960 * mib
    # Never more than an eighth of the available memory...
    assert residency.eviction_bytes(480 * mib, 4 << 30) == 512 * mib
    # ... but never less than the minimum.
    assert residency.eviction_bytes(480 * mib, 100 * mib) == residency.MIN_EVICTION_BYTES


def test_labels():
    mib = 1 << 20
    small = residency.by_size(mib, 4 * mib, 32 * mib)
    assert (small.cache_resident, small.rule) == (True, "l2")
    assert "fits the L2" in small.describe()
    mid = residency.by_size(8 * mib, 4 * mib, 32 * mib)
    assert (mid.cache_resident, mid.rule) == (True, "l3")
    big = residency.by_size(64 * mib, None, 32 * mib)
    assert (big.cache_resident, big.rule) == (False, "l3")
    assert big.describe() == "from memory by L3 size" and big.speedup is None

    t = residency.RESIDENT_SPEEDUP
    warm = residency.measured(1.0, t + 0.01)
    assert warm.cache_resident and warm.speedup == pytest.approx(t + 0.01)
    assert warm.describe().startswith("cache-resident: probe ")
    cold = residency.measured(1.0, t - 0.01)
    assert not cold.cache_resident and cold.describe().startswith("from memory: probe ")
    j = cold.to_json()
    assert j["rule"] == "measured" and j["threshold"] == t and j["speedup"] == pytest.approx(t - 0.01)
    assert residency.by_size(mib, 4 * mib, 32 * mib).to_json()["threshold"] is None
