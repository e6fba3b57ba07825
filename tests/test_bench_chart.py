"""The benchmark's --png chart: which panels it draws (a GB/s panel per
section, a time panel for forward+backward), that it writes a PNG where
matplotlib is importable, and that it says so where it is not."""

from __future__ import annotations

import sys

import pytest

from jax_lngb.bench import chart
from jax_lngb.bench.common import CaseResult, ImplResult


def _case(label: str, ms: dict[str, float]) -> CaseResult:
    results = {n: ImplResult(n, "", 1 << 20, [v], v) for n, v in ms.items()}
    return CaseResult(label, (1024, 256), "float32", 1 << 20, False, {}, results)


SECTIONS = [
    ("reduction", [_case("[1024, 256] f32", {"ours": 1.0, "probe": 0.9, "xla": 2.0})]),
    ("layer_norm", [_case("[1024, 256] f32 fwd", {"ours": 1.0, "xla": 3.0}),
                    _case("[1024, 256] f32 fwd+bwd", {"ours": 2.0, "ours_plain": 4.0, "xla": 9.0})]),
    ("empty", []),
]


def test_panels_per_section_and_the_fwd_bwd_time():
    panels = chart.chart_panels(SECTIONS)
    assert [(t, q, [c.label for c in cs]) for t, cs, q in panels] == [
        ("reduction", "gbps", ["[1024, 256] f32"]),
        ("layer_norm", "gbps", ["[1024, 256] f32 fwd", "[1024, 256] f32 fwd+bwd"]),
        ("layer_norm: fwd+bwd time", "ms", ["[1024, 256] f32 fwd+bwd"]),
    ]


def test_writes_a_png_when_matplotlib_is_there(tmp_path):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(chart.ChartUnavailable, match="matplotlib is not installed"):
            chart.write_png(str(tmp_path / "c.png"), SECTIONS, "t")
        return
    path = tmp_path / "c.png"
    chart.write_png(str(path), SECTIONS, "t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_matplotlib_it_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    with pytest.raises(chart.ChartUnavailable, match="pip install matplotlib"):
        chart.write_png(str(tmp_path / "c.png"), SECTIONS, "t")
    assert not (tmp_path / "c.png").exists()


def test_nothing_measured_is_an_error(tmp_path):
    with pytest.raises(chart.ChartUnavailable, match="no case"):
        chart.write_png(str(tmp_path / "c.png"), [("empty", [])], "t")
