"""The benchmark's charts: the detail chart's panels (a GB/s panel per
section, a time panel for forward+backward) and series, the headline's
panels and bars, the plain-words labels, the redraw from a saved JSON
document, and that a PNG is written where matplotlib is importable and a
clear message given where it is not."""

from __future__ import annotations

import json
import re
import sys

import pytest

from jax_lngb.bench import chart, layer_norm, reduction, rms_norm
from jax_lngb.bench.chart import ChartSection
from jax_lngb.bench.common import CaseResult, ImplResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SECTION_MODULES = (reduction, layer_norm, rms_norm)
INTERNAL_NAMES = {n for m in SECTION_MODULES for n in m.IMPLEMENTATIONS}


def _case(
    label: str, ms: dict[str, float], dtype: str = "float32", shape=(1024, 256), extra: dict | None = None
) -> CaseResult:
    results = {n: ImplResult(n, "", 1 << 20, [v], v) for n, v in ms.items()}
    return CaseResult(label, shape, dtype, 1 << 20, False, dict(extra or {}), results)


def _fb(dtype: str, ms: dict[str, float], shape=(1024, 256), **extra) -> CaseResult:
    return _case(f"{list(shape)} {dtype} fwd+bwd", ms, dtype, shape, {"pass": "fwd+bwd", **extra})


SECTIONS = [
    ChartSection("reduction", "reduction", [_case("[1024, 256] f32", {"ours": 1.0, "probe": 0.9, "xla": 2.0})]),
    ChartSection(
        "layer_norm",
        "layer_norm",
        [
            _case("[1024, 256] f32 fwd", {"ours": 1.0, "xla": 3.0}, extra={"pass": "fwd"}),
            _fb("float32", {"ours": 2.0, "ours_plain": 4.0, "xla": 9.0}),
        ],
    ),
    ChartSection("empty", "empty", []),
]

# A layer_norm run at two dtypes with every headline implementation.
LN_FWD_BWD = {
    "float32": {
        "ours": 35.3,
        "ours_plain": 169.0,
        "xla": 317.0,
        "xla_plain": 466.0,
        "torch": 173.0,
        "torch_plain": 135.0,
        "ours_chained": 120.0,
        "probe": 17.0,
    },
    "bfloat16": {
        "ours": 24.8,
        "ours_plain": 93.0,
        "xla": 331.0,
        "xla_plain": 483.0,
        "torch": 121.5,
        "torch_plain": 104.0,
    },
}


def _ln_section(retain=False, shape=(65536, 768)) -> ChartSection:
    return ChartSection(
        "layer_norm", layer_norm.TITLE, [_fb(dt, ms, shape, retain_host_memory=retain) for dt, ms in LN_FWD_BWD.items()]
    )


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


needs_matplotlib = pytest.mark.skipif(
    not _has_matplotlib(), reason="matplotlib is not installed (the charts are optional)"
)


# ----------------------------------------------------------------- words


@pytest.mark.parametrize("module", SECTION_MODULES, ids=lambda m: m.NAME)
def test_every_implementation_has_plain_words(module):
    for name in module.IMPLEMENTATIONS:
        words = chart.label(module.NAME, name)
        assert words != name, f"{module.NAME}: {name} has no label"
        # No internal name shows through (the ones with an underscore are
        # never English; "ours" reads as a word but is no label either).
        leaked = [n for n in INTERNAL_NAMES if ("_" in n and n in words) or words == n]
        assert not leaked, f"{module.NAME}: {name} -> {words!r} shows {leaked}"


def test_labels_say_what_each_name_measures():
    assert "steady state" in chart.label("layer_norm", "ours")
    assert "plain jax.jit" in chart.label("layer_norm", "ours_plain")
    assert "chained" in chart.label("layer_norm", "ours_chained_plain")
    assert chart.label("layer_norm", "xla").startswith("XLA (jax.numpy autodiff)")
    assert chart.label("layer_norm", "torch").startswith("PyTorch (CPU)")
    assert "streaming" in chart.label("layer_norm", "xla_stream")
    assert "memory ceiling" in chart.label("reduction", "probe")
    # The reduction's XLA is a sum, not autodiff; rms_norm's PyTorch has no out=.
    assert "autodiff" not in chart.label("reduction", "xla")
    assert "fresh outputs" in chart.label("rms_norm", "torch")
    assert chart.label("layer_norm", "something_new") == "something_new"


def test_plain_jit_is_hatched_and_shares_its_family_colour():
    series = {s.name: s for s in chart.panel_series("layer_norm", _ln_section().cases)}
    for name, s in series.items():
        assert (s.hatch == chart.PLAIN_HATCH) == name.endswith("_plain"), name
        assert s.label == chart.label("layer_norm", name)
    assert series["ours"].colour == series["ours_plain"].colour
    assert series["xla"].colour != series["ours"].colour
    rms = {s.name: s for s in chart.panel_series("rms_norm", [_fb("float32", {"ours": 1, "ours_jit": 2, "torch": 3})])}
    assert rms["ours_jit"].hatch and rms["torch"].hatch and not rms["ours"].hatch


@pytest.mark.parametrize("ms,text", [(35.3, "35.3"), (169.4, "169"), (8.921, "8.92"), (466.0, "466")])
def test_milliseconds_have_three_figures(ms, text):
    assert chart.format_ms(ms) == text


# ------------------------------------------------------------ the detail


def test_panels_per_section_and_the_fwd_bwd_time():
    panels = chart.chart_panels(SECTIONS)
    assert [(name, t, q, [c.label for c in cs]) for name, t, cs, q in panels] == [
        ("reduction", "reduction", "gbps", ["[1024, 256] f32"]),
        ("layer_norm", "layer_norm", "gbps", ["[1024, 256] f32 fwd", "[1024, 256] float32 fwd+bwd"]),
        ("layer_norm", "layer_norm: fwd+bwd time", "ms", ["[1024, 256] float32 fwd+bwd"]),
    ]


# ---------------------------------------------------------- the headline


def test_headline_bars_per_dtype():
    hl = chart.headline([SECTIONS[0], _ln_section()])
    assert hl.section == "layer_norm"
    assert "LayerNorm" in hl.title and "[65536, 768]" in hl.title and "lower is better" in hl.title
    assert [p.title for p in hl.panels] == ["float32", "bfloat16"]
    for panel, (dtype, ms) in zip(hl.panels, LN_FWD_BWD.items()):
        got = [(b.group, b.plain, b.ms) for b in panel.bars]
        assert got == [
            ("jax_lngb", False, ms["ours"]),
            ("jax_lngb", True, ms["ours_plain"]),
            ("XLA (jax.numpy autodiff)", False, ms["xla"]),
            ("XLA (jax.numpy autodiff)", True, ms["xla_plain"]),
            ("PyTorch (CPU)", False, ms["torch"]),
            ("PyTorch (CPU)", True, ms["torch_plain"]),
        ], dtype
        for b in panel.bars:
            assert (b.hatch == chart.PLAIN_HATCH) == b.plain
            # The value is printed on the bar, and beside the others how many
            # times jax_lngb's time of the same kind it is.
            assert b.text.startswith(chart.format_ms(b.ms) + " ms"), b.text
            base = ms["ours_plain" if b.plain else "ours"]
            if b.group == "jax_lngb":
                assert "x" not in b.text.replace(" ms", "")
            else:
                assert b.text.endswith(f"\n{b.ms / base:.1f}x"), b.text
        assert not any(n in b.group for b in panel.bars for n in INTERNAL_NAMES if "_" in n)


def test_headline_ratio_of_the_readme_table():
    f32 = chart.headline([_ln_section()]).panels[0]
    xla = next(b for b in f32.bars if b.group.startswith("XLA") and not b.plain)
    assert xla.text == "317 ms\n9.0x"


def test_headline_legend_says_whether_the_opt_in_was_on():
    assert chart.headline([_ln_section(retain=False)]).plain_label.endswith("retain_host_memory off")
    assert chart.headline([_ln_section(retain=True)]).plain_label.endswith("retain_host_memory on")
    unknown = ChartSection("layer_norm", "t", [_fb("float32", {"ours": 1.0, "ours_plain": 2.0})])
    assert chart.headline([unknown]).plain_label == chart.PLAIN_LABEL


def test_headline_skips_missing_measurements():
    # No PyTorch installed, and a failed XLA plain step (ms None).
    sec = ChartSection("layer_norm", "t", [_fb("float32", {"ours": 2.0, "ours_plain": 3.0, "xla": 9.0})])
    sec.cases[0].results["xla_plain"] = ImplResult("xla_plain", "", 1, [], None, failed="boom")
    bars = chart.headline([sec]).panels[0].bars
    assert [(b.group, b.plain) for b in bars] == [
        ("jax_lngb", False),
        ("jax_lngb", True),
        ("XLA (jax.numpy autodiff)", False),
    ]


def test_headline_of_rms_norm_has_pytorch_as_fresh_outputs_only():
    sec = ChartSection(
        "rms_norm",
        rms_norm.TITLE,
        [_fb("float32", {"ours": 34.1, "ours_jit": 150.0, "xla": 180.0, "xla_jit": 400.0, "torch": 1190.0})],
    )
    hl = chart.headline([sec])
    assert "RMSNorm" in hl.title
    torch_bars = [b for b in hl.panels[0].bars if b.group == "PyTorch (CPU)"]
    assert [(b.plain, b.ms) for b in torch_bars] == [(True, 1190.0)]


def test_headline_picks_the_shape():
    sec = ChartSection(
        "layer_norm", "t", [_fb("float32", {"ours": 1.0}, (8, 16)), _fb("float32", {"ours": 5.0}, (32, 64))]
    )
    assert chart.headline([sec]).panels[0].bars[0].ms == 1.0
    assert chart.headline([sec], shape=(32, 64)).panels[0].bars[0].ms == 5.0
    with pytest.raises(chart.ChartUnavailable, match=r"\[4, 4\]"):
        chart.headline([sec], shape=(4, 4))


def test_headline_needs_a_norm_section():
    with pytest.raises(chart.ChartUnavailable, match="fwd\\+bwd"):
        chart.headline([SECTIONS[0]])
    with pytest.raises(chart.ChartUnavailable, match="rms_norm"):
        chart.headline([_ln_section()], section="rms_norm")


def test_default_caption_has_the_machine_and_the_date():
    cap = chart.default_caption(
        {"cpu": "Some CPU", "cores": 2, "isa": "avx512", "jax": "0.10.2", "torch": None}, "2026-12-07T15:55:00+00:00"
    )
    assert cap == "Some CPU, 2 cores, avx512 kernels; jax 0.10.2; 2026-12-07"
    assert "\n" not in cap


# ------------------------------------------------------- from saved JSON


def _doc(with_sections: bool = True) -> dict:
    """A document as `python -m jax_lngb.bench --section all --json` writes
    it (with_sections=False: as it did before cases recorded their section)."""
    ln = [{**c.to_json(), "section": "layer_norm"} for c in _ln_section().cases]
    for c in ln:
        c["extra"]["notes"] = ["errors vs float64 LayerNorm"]
    rms = [
        {
            **_fb(
                "float32", {"ours": 3.0, "ours_jit": 4.0}, (65536, 768), notes=["errors vs float64 RMSNorm"]
            ).to_json(),
            "section": "rms_norm",
        }
    ]
    red = [{**SECTIONS[0].cases[0].to_json(), "section": "reduction"}]
    doc = {
        "machine": {"cpu": "Synthetic CPU", "cores": 2},
        "args": {"section": "all"},
        "date": "2026-12-07T15:55:00+00:00",
        "cases": red + ln + rms,
        "targets": [],
    }
    if with_sections:
        doc["sections"] = [
            {"name": n, "title": t} for n, t in (("reduction", "R"), ("layer_norm", "L"), ("rms_norm", "M"))
        ]
    else:
        for c in doc["cases"]:
            del c["section"]
    return doc


@pytest.mark.parametrize("with_sections", [True, False], ids=["sections", "older-document"])
def test_sections_from_json(with_sections):
    secs = chart.sections_from_json(json.loads(json.dumps(_doc(with_sections))))
    assert [(s.name, len(s.cases)) for s in secs] == [("reduction", 1), ("layer_norm", 2), ("rms_norm", 1)]
    if with_sections:
        assert [s.title for s in secs] == ["R", "L", "M"]
    else:
        assert secs[1].title == layer_norm.TITLE
    # The figures survive the round trip: the same headline as from the run.
    assert chart.headline(secs) == chart.headline([_ln_section()])
    assert secs[0].cases[0].results["probe"].gbps == SECTIONS[0].cases[0].results["probe"].gbps


def test_a_single_section_document_takes_its_section_from_the_args():
    doc = _doc(with_sections=False)
    doc["cases"] = doc["cases"][3:]  # the rms_norm case only
    doc["cases"][0]["extra"]["notes"] = []
    doc["args"]["section"] = "rms_norm"
    assert [s.name for s in chart.sections_from_json(doc)] == ["rms_norm"]


def test_not_a_benchmark_document():
    with pytest.raises(ValueError, match="'cases'"):
        chart.sections_from_json({"machine": {}})


def test_cli_needs_something_to_draw(tmp_path, capsys):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_doc()))
    with pytest.raises(SystemExit):
        chart.main(["--from-json", str(path)])
    assert "--headline" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        chart.main(["--from-json", str(tmp_path / "missing.json"), "--headline", str(tmp_path / "h.png")])
    assert "--from-json" in capsys.readouterr().err


# ------------------------------------------------------------------ PNGs


@needs_matplotlib
def test_writes_both_pngs_from_a_saved_json(tmp_path, capsys):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_doc()))
    head, detail = tmp_path / "h.png", tmp_path / "d.png"
    assert (
        chart.main(
            [
                "--from-json",
                str(path),
                "--headline",
                str(head),
                "--detail",
                str(detail),
                "--caption",
                "Synthetic CPU, 2 cores, 2026-12-07",
            ]
        )
        == 0
    )
    for p in (head, detail):
        assert p.read_bytes()[:8] == PNG_MAGIC
    assert f"headline chart written to {head}" in capsys.readouterr().out


@needs_matplotlib
def test_headline_figure_carries_the_words(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    texts: list[str] = []
    hatches: list[str | None] = []
    real_savefig = plt.Figure.savefig

    def spy(fig, *a, **k):
        texts.extend(t.get_text() for t in fig.findobj(lambda o: hasattr(o, "get_text")))
        hatches.extend(p.get_hatch() for ax in fig.axes for p in ax.patches)
        return real_savefig(fig, *a, **k)

    monkeypatch.setattr(plt.Figure, "savefig", spy)
    chart.write_headline_png(str(tmp_path / "h.png"), [_ln_section()], "Synthetic CPU, 2 cores, 2026-12-07")
    joined = "\n".join(texts)
    for words in (
        "jax_lngb",
        "XLA",
        "PyTorch (CPU)",
        chart.STEADY_LABEL,
        "Synthetic CPU, 2 cores, 2026-12-07",
        "35.3 ms",
        "466 ms",
        "float32",
        "bfloat16",
    ):
        assert words in joined, words
    assert not re.search(r"\b(ours_\w+|xla_\w+|torch_plain)\b", joined)
    assert hatches.count(chart.PLAIN_HATCH) == 6 and hatches.count(None) == 6


@needs_matplotlib
def test_writes_the_detail_png(tmp_path):
    path = tmp_path / "c.png"
    chart.write_png(str(path), SECTIONS, "t")
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_without_matplotlib_it_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    with pytest.raises(chart.ChartUnavailable, match="pip install matplotlib"):
        chart.write_png(str(tmp_path / "c.png"), SECTIONS, "t")
    with pytest.raises(chart.ChartUnavailable, match="pip install matplotlib"):
        chart.write_headline_png(str(tmp_path / "h.png"), [_ln_section()], "c")
    assert not (tmp_path / "c.png").exists() and not (tmp_path / "h.png").exists()


def test_nothing_measured_is_an_error(tmp_path):
    with pytest.raises(chart.ChartUnavailable, match="no case"):
        chart.write_png(str(tmp_path / "c.png"), [ChartSection("empty", "empty", [])], "t")
