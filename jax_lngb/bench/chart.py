"""The optional PNG chart: GB/s per case and implementation, one panel per
section (the probe's bar is the memory ceiling), and the forward+backward
time per implementation. Needs matplotlib, which jax_lngb never requires."""

from __future__ import annotations

from collections.abc import Sequence

from .common import CaseResult


# Cases whose time gets a panel of its own (the layer_norm section's labels).
TIME_PANEL_SUFFIX = "fwd+bwd"


class ChartUnavailable(RuntimeError):
    pass


def chart_panels(sections: Sequence[tuple[str, Sequence[CaseResult]]]) -> list[tuple[str, Sequence[CaseResult], str]]:
    """(title, cases, "gbps" or "ms") per panel: one GB/s panel per section,
    then a time panel for the cases where time is what a user pays
    (forward+backward moves several passes' bytes, so milliseconds say
    more there than GB/s)."""
    panels: list[tuple[str, Sequence[CaseResult], str]] = [(t, cs, "gbps") for t, cs in sections if cs]
    for t, cs in sections:
        timed = [c for c in cs if c.label.endswith(TIME_PANEL_SUFFIX)]
        if timed:
            panels.append((f"{t}: {TIME_PANEL_SUFFIX} time", timed, "ms"))
    return panels


def write_png(path: str, sections: Sequence[tuple[str, Sequence[CaseResult]]], title: str) -> None:
    """Draws one grouped bar chart per (section title, cases); raises
    ChartUnavailable when matplotlib cannot be imported."""
    panels = chart_panels(sections)
    if not panels:
        raise ChartUnavailable("no case was measured")
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ChartUnavailable(f"matplotlib is not installed ({e}); `pip install matplotlib` to get --png") from e

    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8, 0.9 * max(len(cs) for _, cs, _ in panels) + 3),
                                                       4.5 * len(panels)), squeeze=False)
    # One colour per implementation name across every panel.
    colours: dict[str, str] = {}
    for _, cases, _ in panels:
        for c in cases:
            for n in c.results:
                colours.setdefault(n, f"C{len(colours) % 10}")
    for ax, (section_title, cases, quantity) in zip(axes[:, 0], panels):
        names: list[str] = []
        for c in cases:
            for n in c.results:
                if n not in names:
                    names.append(n)
        width = 0.8 / max(len(names), 1)
        for k, name in enumerate(names):
            xs, ys = [], []
            for i, c in enumerate(cases):
                r = c.results.get(name)
                value = None if r is None else (r.gbps if quantity == "gbps" else r.ms)
                if value is not None:
                    xs.append(i + (k - (len(names) - 1) / 2) * width)
                    ys.append(value)
            ax.bar(xs, ys, width=width, label=name, color=colours[name],
                   hatch="//" if name.endswith("_plain") else None)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels([c.label + (" (cache)" if c.cache_resident else "") for c in cases],
                           rotation=45, ha="right", fontsize=8)
        ax.set_ylabel("GB/s (the bytes each implementation reads)" if quantity == "gbps"
                      else "milliseconds per call (lower is better)")
        ax.set_title(section_title, fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
