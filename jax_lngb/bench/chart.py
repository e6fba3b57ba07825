"""The benchmark's optional PNG charts. Needs matplotlib, which jax_lngb
never requires.

Two charts, both drawn from the measured cases (or from a saved ``--json``
document, without measuring again):

* the headline (``--png-headline``): one panel per dtype, the forward+backward
  milliseconds of jax_lngb, XLA and PyTorch, each with a steady-state bar
  (outputs reused, donated) and a hatched plain ``jax.jit`` bar (fresh
  outputs), the value printed on every bar. It is what the README shows.
* the detail (``--png``): every implementation, GB/s per case and one panel
  per section, then a time panel for forward+backward. It is what
  docs/performance.md shows.

Series are labelled in plain words (`LABELS`), never with the internal
implementation names the tables and the JSON use.

    python -m jax_lngb.bench.chart --from-json bench.json --headline headline.png --detail detail.png
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .common import CaseResult, ImplResult, format_shape, parse_shape

# Cases whose time gets a panel of its own (the norm sections' pass).
TIME_PANEL_SUFFIX = "fwd+bwd"


class ChartUnavailable(RuntimeError):
    pass


class ChartSection(NamedTuple):
    """One benchmark section's cases: `name` is the section's module name
    (reduction, layer_norm, rms_norm), which decides the labels."""

    name: str
    title: str
    cases: Sequence[CaseResult]


# ------------------------------------------------------------------ words

# What each internal implementation name measures, in plain words (see the
# section modules' docstrings). Steady state: outputs written into buffers
# that earlier calls already touched (donated to jit, PyTorch's out=
# overloads). Plain jax.jit: nothing donated, fresh outputs every call.
LABELS: dict[str, str] = {
    "ours": "jax_lngb, steady state (outputs donated)",
    "ours_plain": "jax_lngb, plain jax.jit (fresh outputs)",
    "ours_jit": "jax_lngb, plain jax.jit (fresh outputs)",
    "ours_chained": "jax_lngb, chained backward (CANN's two ops), steady state",
    "ours_chained_plain": "jax_lngb, chained backward, plain jax.jit",
    "xla": "XLA (jax.numpy autodiff), steady state",
    "xla_plain": "XLA (jax.numpy autodiff), plain jax.jit",
    "xla_jit": "XLA (jax.numpy autodiff), plain jax.jit",
    "torch": "PyTorch (CPU), steady state (out= buffers)",
    "torch_plain": "PyTorch (CPU), fresh outputs",
    "numpy": "NumPy (einsum, float32 sums)",
    "probe": "memory ceiling: a streaming read of the inputs",
    "xla_stream": "XLA streaming pass: the same bytes, no arithmetic",
}
# Where a section's implementation measures something else than the name
# says elsewhere: the reduction has no autodiff, and the rms_norm section's
# PyTorch has no out= form (fresh outputs every call).
SECTION_LABELS: dict[str, dict[str, str]] = {
    "reduction": {
        "ours": "jax_lngb (LayerNormGradBeta kernel)",
        "xla": "XLA (jax.numpy sums)",
        "torch": "PyTorch (CPU LayerNorm backward)",
    },
    "rms_norm": {"torch": "PyTorch (CPU, autograd), fresh outputs"},
}
# Implementations whose outputs are fresh every call, beyond the *_plain and
# *_jit names.
FRESH_OUTPUTS = {("rms_norm", "torch")}
PLAIN_HATCH = "//"

# One colour per implementation family, steady and plain alike (the hatch
# tells them apart).
_FAMILY_COLOURS = {
    "ours": "C0",
    "ours_chained": "C8",
    "xla": "C2",
    "torch": "C4",
    "numpy": "C1",
    "probe": "C6",
    "xla_stream": "C7",
}


def label(section: str, name: str) -> str:
    """The plain-words label of implementation `name` in `section`; an
    implementation nobody named yet keeps its own name."""
    return SECTION_LABELS.get(section, {}).get(name) or LABELS.get(name, name)


def is_plain(section: str, name: str) -> bool:
    """Whether `name` allocates fresh outputs every call (a plain jit step)."""
    return name.endswith(("_plain", "_jit")) or (section, name) in FRESH_OUTPUTS


def family(name: str) -> str:
    for suffix in ("_plain", "_jit"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def colour(name: str) -> str:
    return _FAMILY_COLOURS.get(family(name), "C9")


def format_ms(ms: float) -> str:
    """Three significant figures at most: 35.3, 169, 8.92."""
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.2f}"


# ------------------------------------------------------------ the detail


@dataclass(frozen=True)
class Series:
    """One legend entry of a detail panel."""

    name: str
    label: str
    colour: str
    hatch: str | None


def chart_panels(sections: Sequence[ChartSection]) -> list[tuple[str, str, Sequence[CaseResult], str]]:
    """(section name, title, cases, "gbps" or "ms") per detail panel: one
    GB/s panel per section, then a time panel for the cases where time is
    what a user pays (forward+backward moves several passes' bytes, so
    milliseconds say more there than GB/s)."""
    panels: list[tuple[str, str, Sequence[CaseResult], str]] = [
        (s.name, s.title, s.cases, "gbps") for s in sections if s.cases
    ]
    for s in sections:
        timed = [c for c in s.cases if c.label.endswith(TIME_PANEL_SUFFIX)]
        if timed:
            panels.append((s.name, f"{s.title}: {TIME_PANEL_SUFFIX} time", timed, "ms"))
    return panels


def panel_series(section: str, cases: Sequence[CaseResult]) -> list[Series]:
    """The series of a detail panel, in the order the cases measured them."""
    names: list[str] = []
    for c in cases:
        for n in c.results:
            if n not in names:
                names.append(n)
    return [Series(n, label(section, n), colour(n), PLAIN_HATCH if is_plain(section, n) else None) for n in names]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ChartUnavailable(f"matplotlib is not installed ({e}); `pip install matplotlib` to get a chart") from e
    return plt


def write_png(path: str, sections: Sequence[ChartSection], title: str) -> None:
    """The detail chart: one grouped bar chart per panel of `chart_panels`;
    raises ChartUnavailable when matplotlib cannot be imported."""
    panels = chart_panels(sections)
    if not panels:
        raise ChartUnavailable("no case was measured")
    plt = _pyplot()
    widest = max(len(cs) for _, _, cs, _ in panels)
    # The plain-words legends take about 4 inches right of the axes.
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8, 0.9 * widest + 3) + 4, 4.8 * len(panels)), squeeze=False)
    for ax, (section, panel_title, cases, quantity) in zip(axes[:, 0], panels):
        series = panel_series(section, cases)
        width = 0.8 / max(len(series), 1)
        for k, s in enumerate(series):
            xs, ys = [], []
            for i, c in enumerate(cases):
                r = c.results.get(s.name)
                value = None if r is None else (r.gbps if quantity == "gbps" else r.ms)
                if value is not None:
                    xs.append(i + (k - (len(series) - 1) / 2) * width)
                    ys.append(value)
            ax.bar(
                xs,
                ys,
                width=width,
                label=s.label,
                color=s.colour,
                alpha=0.55 if s.hatch else 1.0,
                hatch=s.hatch,
                edgecolor="black",
                linewidth=0.4,
            )
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(
            [c.label + (" (cache)" if c.cache_resident else "") for c in cases], rotation=30, ha="right", fontsize=8
        )
        ax.set_ylabel(
            "GB/s (the bytes each implementation reads)"
            if quantity == "gbps"
            else "milliseconds per call (lower is better)",
            fontsize=9,
        )
        # Section titles run long: wrapped, they stay inside the figure.
        ax.set_title(textwrap.fill(panel_title, 80), fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(textwrap.fill(title, 100), fontsize=10)
    fig.tight_layout()
    # The legends sit outside the axes: the tight box keeps them whole.
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


# ---------------------------------------------------------- the headline

# The headline's implementations per section: (label, steady-state name,
# plain-jit name); None where the section has no such measurement.
HEADLINE_IMPLS: dict[str, tuple[tuple[str, str | None, str | None], ...]] = {
    "layer_norm": (
        ("jax_lngb", "ours", "ours_plain"),
        ("XLA (jax.numpy autodiff)", "xla", "xla_plain"),
        ("PyTorch (CPU)", "torch", "torch_plain"),
    ),
    "rms_norm": (
        ("jax_lngb", "ours", "ours_jit"),
        ("XLA (jax.numpy autodiff)", "xla", "xla_jit"),
        ("PyTorch (CPU)", None, "torch"),
    ),
}
HEADLINE_NORMS = {"layer_norm": "LayerNorm", "rms_norm": "RMSNorm"}
STEADY_LABEL = "steady state (outputs reused, donated)"
PLAIN_LABEL = "plain jax.jit step (fresh outputs)"
RATIO_NOTE = "N.Nx on a bar: its time over jax_lngb's of the same kind (steady state or plain jax.jit)"


@dataclass(frozen=True)
class Bar:
    """One bar of the headline: `group` is the implementation's label,
    `plain` says which of its two bars this is."""

    group: str
    plain: bool
    ms: float
    colour: str
    hatch: str | None
    text: str  # printed on the bar


@dataclass(frozen=True)
class HeadlinePanel:
    title: str  # the dtype
    bars: list[Bar]
    retain_host_memory: bool | None  # the plain-jit opt-in, where the section records it


@dataclass(frozen=True)
class Headline:
    section: str
    title: str
    panels: list[HeadlinePanel]

    @property
    def plain_label(self) -> str:
        """The hatched bars' legend entry, with the opt-in's state when every
        panel recorded the same one."""
        states = {p.retain_host_memory for p in self.panels}
        if len(states) == 1 and None not in states:
            return f"{PLAIN_LABEL}, retain_host_memory {'on' if states.pop() else 'off'}"
        return PLAIN_LABEL


def _headline_section(sections: Sequence[ChartSection], section: str | None) -> ChartSection:
    for s in sections:
        if (
            (section is None or s.name == section)
            and s.name in HEADLINE_IMPLS
            and any(c.extra.get("pass") == TIME_PANEL_SUFFIX for c in s.cases)
        ):
            return s
    wanted = f"the {section} section" if section else f"a {' or '.join(HEADLINE_IMPLS)} section"
    raise ChartUnavailable(f"the headline needs {wanted} with {TIME_PANEL_SUFFIX} cases; none was measured")


def _ms(case: CaseResult, name: str | None) -> float | None:
    r = case.results.get(name) if name is not None else None
    return r.ms if r is not None and r.ms else None


def headline(
    sections: Sequence[ChartSection], section: str | None = None, shape: Sequence[int] | None = None
) -> Headline:
    """What the headline draws: the forward+backward cases of `section` (the
    first of layer_norm / rms_norm measured, by default) at `shape` (the
    first measured, by default), one panel per dtype. A bar's text is its
    milliseconds and, beside the other implementations, how many times
    jax_lngb's time of the same kind (steady or plain) it is."""
    sec = _headline_section(sections, section)
    cases = [c for c in sec.cases if c.extra.get("pass") == TIME_PANEL_SUFFIX]
    want = tuple(shape) if shape is not None else tuple(cases[0].shape)
    cases = [c for c in cases if tuple(c.shape) == want]
    if not cases:
        raise ChartUnavailable(f"no {TIME_PANEL_SUFFIX} case at shape {format_shape(want)} in the {sec.name} section")
    impls = HEADLINE_IMPLS[sec.name]
    panels = []
    for c in cases:
        base = {False: _ms(c, impls[0][1]), True: _ms(c, impls[0][2])}
        bars = []
        for k, (group, steady, plain) in enumerate(impls):
            for is_plain_bar, name in ((False, steady), (True, plain)):
                value = _ms(c, name)
                if value is None:
                    continue
                text = f"{format_ms(value)} ms"
                if k and base[is_plain_bar]:
                    text += f"\n{value / base[is_plain_bar]:.1f}x"
                bars.append(Bar(group, is_plain_bar, value, colour(name), PLAIN_HATCH if is_plain_bar else None, text))
        rhm = c.extra.get("retain_host_memory")
        panels.append(HeadlinePanel(c.dtype, bars, None if rhm is None else bool(rhm)))
    title = f"{HEADLINE_NORMS[sec.name]} forward+backward step, {format_shape(want)}: milliseconds, lower is better"
    return Headline(sec.name, title, panels)


def write_headline_png(
    path: str,
    sections: Sequence[ChartSection],
    caption: str,
    section: str | None = None,
    shape: Sequence[int] | None = None,
) -> None:
    """The headline chart (see `headline`), with `caption` (the machine and
    the date, one line) under it; raises ChartUnavailable when matplotlib
    cannot be imported or nothing fits the headline."""
    hl = headline(sections, section, shape)
    plt = _pyplot()
    from matplotlib.patches import Patch

    n = len(hl.panels)
    fig, axes = plt.subplots(1, n, figsize=(4.6 * n + 0.8, 4.6), sharey=True, squeeze=False)
    top = max(b.ms for p in hl.panels for b in p.bars)
    groups = [g for g, _, _ in HEADLINE_IMPLS[hl.section]]
    width = 0.38
    for ax, panel in zip(axes[0], hl.panels):
        present = [g for g in groups if any(b.group == g for b in panel.bars)]
        for b in panel.bars:
            x = present.index(b.group) + (width / 2 if b.plain else -width / 2)
            bars = ax.bar(
                [x],
                [b.ms],
                width=width,
                color=b.colour,
                alpha=0.55 if b.plain else 1.0,
                hatch=b.hatch,
                edgecolor="black",
                linewidth=0.6,
            )
            ax.bar_label(bars, labels=[b.text], padding=2, fontsize=8)
        ax.set_xticks(range(len(present)))
        ax.set_xticklabels([textwrap.fill(g, 14) for g in present], fontsize=9)
        ax.set_title(panel.title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    # Room above the tallest bar for its two lines of text.
    axes[0][0].set_ylim(0, top * 1.22)
    axes[0][0].set_ylabel("fwd+bwd milliseconds (lower is better)", fontsize=9)
    handles = [
        Patch(facecolor="lightgrey", edgecolor="black", label=STEADY_LABEL),
        Patch(facecolor="lightgrey", edgecolor="black", hatch=PLAIN_HATCH, alpha=0.55, label=hl.plain_label),
    ]
    fig.suptitle(hl.title, fontsize=11, y=0.99)
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.935), ncol=2, fontsize=8, frameon=False)
    fig.text(0.5, 0.86, RATIO_NOTE, fontsize=7.5, ha="center", va="bottom", color="dimgray")
    if caption:
        fig.text(0.01, 0.01, caption, fontsize=7.5, ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 0.86))
    # tight_layout leaves a gap under the note; the panel titles need less.
    fig.subplots_adjust(top=0.79)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


# ------------------------------------------------------- from saved JSON


def _section_of(case: Mapping[str, Any], args_section: str | None) -> str:
    """A case's section in a document written before cases recorded it: the
    run's --section, or for --section all what the case's extra says (the
    norm sections' notes name their norm; the reduction has no pass)."""
    if args_section and args_section != "all":
        return args_section
    extra = case.get("extra") or {}
    if "pass" not in extra:
        return "reduction"
    return "rms_norm" if any("RMSNorm" in n for n in extra.get("notes") or []) else "layer_norm"


def _title(name: str) -> str:
    try:
        return importlib.import_module(f"{__package__}.{name}").TITLE
    except (ImportError, AttributeError):
        return name


def case_from_json(c: Mapping[str, Any]) -> CaseResult:
    """The figures of one saved case (no outputs, no residency details)."""
    results = {
        name: ImplResult(
            name,
            r.get("note", ""),
            int(r.get("bytes_read") or c.get("bytes_read") or 0),
            list(r.get("times_ms") or []),
            r.get("ms"),
            r.get("errors") or {},
            r.get("failed"),
        )
        for name, r in (c.get("results") or {}).items()
    }
    return CaseResult(
        c["label"],
        tuple(int(d) for d in c["shape"]),
        c["dtype"],
        int(c.get("bytes_read") or 0),
        bool(c.get("cache_resident")),
        dict(c.get("extra") or {}),
        results,
    )


def sections_from_json(doc: Mapping[str, Any]) -> list[ChartSection]:
    """The sections of a `python -m jax_lngb.bench --json` document, in the
    order they ran. Documents that predate the per-case "section" key are
    read too (see `_section_of`)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("cases"), list):
        raise ValueError("not a benchmark JSON document: it has no 'cases' list")
    titles = {s["name"]: s.get("title") or _title(s["name"]) for s in doc.get("sections") or []}
    args_section = (doc.get("args") or {}).get("section")
    per: dict[str, list[CaseResult]] = {name: [] for name in titles}
    for c in doc["cases"]:
        name = c.get("section") or _section_of(c, args_section)
        per.setdefault(name, []).append(case_from_json(c))
    return [ChartSection(name, titles.get(name) or _title(name), cases) for name, cases in per.items()]


def default_caption(machine: Mapping[str, Any], date: str | None) -> str:
    """One line: the CPU, its cores, the kernels' ISA, the peers' versions
    and the date of the run (what a reader needs to weigh the figures)."""
    parts = [f"{machine.get('cpu', 'unknown CPU')}, {machine.get('cores', '?')} cores"]
    if machine.get("isa"):
        parts[0] += f", {machine['isa']} kernels"
    versions = [
        f"jax_lngb {machine['jax_lngb']}" if machine.get("jax_lngb") else None,
        f"jax {machine['jax']}" if machine.get("jax") else None,
        f"PyTorch {machine['torch']}" if machine.get("torch") else None,
    ]
    if any(versions):
        parts.append(", ".join(v for v in versions if v))
    if date:
        parts.append(str(date)[:10])
    return "; ".join(parts)


def today() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m jax_lngb.bench.chart",
        description="Draw the benchmark's charts from a saved `python -m jax_lngb.bench --json` document, "
        "without measuring again (needs matplotlib).",
    )
    p.add_argument("--from-json", metavar="PATH", required=True, help="the benchmark's JSON document")
    p.add_argument(
        "--headline",
        metavar="PATH",
        help="write the headline chart here: fwd+bwd ms of jax_lngb, XLA and PyTorch, steady state "
        "and plain jax.jit, one panel per dtype",
    )
    p.add_argument("--detail", metavar="PATH", help="write the detail chart here: every implementation, GB/s")
    p.add_argument(
        "--caption", help="the headline's one-line caption (default: the machine and the date the document records)"
    )
    p.add_argument(
        "--section",
        choices=tuple(HEADLINE_IMPLS),
        help="the headline's section (default: the first of them in the document)",
    )
    p.add_argument("--shape", metavar="RxH", help="the headline's shape (default: the first measured)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.headline and not args.detail:
        parser.error("nothing to draw: give --headline PATH, --detail PATH or both")
    shape = None
    if args.shape:
        try:
            shape = parse_shape(args.shape)
        except ValueError as e:
            parser.error(f"--shape: {e}")
    try:
        with open(args.from_json) as f:
            doc = json.load(f)
        sections = sections_from_json(doc)
    except (OSError, ValueError) as e:
        parser.error(f"--from-json {args.from_json}: {e}")
    machine = doc.get("machine") or {}
    status = 0
    try:
        if args.headline:
            caption = args.caption if args.caption is not None else default_caption(machine, doc.get("date"))
            write_headline_png(args.headline, sections, caption, args.section, shape)
            print(f"headline chart written to {args.headline}")
        if args.detail:
            write_png(
                args.detail,
                sections,
                f"jax_lngb benchmark on {machine.get('cpu', 'unknown CPU')}, {machine.get('cores', '?')} cores",
            )
            print(f"detail chart written to {args.detail}")
    except ChartUnavailable as e:
        print(f"no chart written: {e}", file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
