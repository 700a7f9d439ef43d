"""The report's charts, drawn with matplotlib (object API, no pyplot state) → inline SVG or PNG.

Each function returns a ``Figure``; :func:`svg` turns it into an inline ``<svg>``
string (text kept as text, fixed hash salt, no date: the same data gives the same
bytes), :func:`save_png` writes a PNG for READMEs and papers.
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from replaykit.report.documents import EpochSection

BASELINE, CANDIDATE, ACCEPT = "#4c72b0", "#dd8452", "#2ca02c"
RC: Any = {
    "svg.fonttype": "none",
    "svg.hashsalt": "replaykit",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def svg(fig: Figure) -> str:
    """An inline ``<svg>`` element (no XML prolog, no DOCTYPE)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = re.sub(
        r"<metadata>.*?</metadata>\s*", "", text, flags=re.S
    )  # RDF namespaces only; keep the page free of URLs
    return text[text.index("<svg") :]


def save_png(fig: Figure, path: Path) -> Path:
    import matplotlib

    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context(RC):
        fig.savefig(path, format="png", dpi=120, metadata={"Software": None})
    return path


def training_curve(epochs: list[EpochSection]) -> Figure:
    """Solved per epoch (baseline vs candidate, accepted epochs marked), then tokens and environment actions per epoch."""
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(7.5, 5.6)
        solved, tokens, steps = fig.subplots(3, 1, sharex=True, height_ratios=[2, 1, 1])
        xs = [e["epoch"] for e in epochs]

        def series(ax: Any, key: Literal["solved", "tokens", "steps"], label: str, gid: str) -> None:
            b = [e["baseline"][key] for e in epochs]
            c = [e["candidate"][key] if e["candidate"] else math.nan for e in epochs]
            ax.plot(xs, b, marker="o", color=BASELINE, label="baseline", gid=f"{gid}-baseline")
            ax.plot(
                xs, c, marker="s", linestyle="--", color=CANDIDATE, label="candidate", gid=f"{gid}-candidate"
            )
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)

        series(solved, "solved", "solved", "curve-solved")
        accepted = [
            (e["epoch"], c["solved"]) for e in epochs if e["decision"] == "accepted" and (c := e["candidate"])
        ]
        if accepted:
            solved.scatter(
                [epoch for epoch, _ in accepted],
                [n for _, n in accepted],
                s=180,
                marker="*",
                color=ACCEPT,
                zorder=5,
                label="accepted",
                gid="curve-accepted",
            )
        total = max((e["baseline"]["total"] for e in epochs), default=0)
        solved.set_ylim(-0.5, total + 0.5)
        solved.legend(loc="lower right", fontsize=8)
        solved.set_title("solved task instances per epoch")
        series(tokens, "tokens", "tokens", "curve-tokens")
        series(steps, "steps", "actions", "curve-steps")
        steps.set_xlabel("epoch")
        steps.set_xticks(xs)
    return fig


def panel_curve(epochs: list[EpochSection], panels: list[str]) -> Figure:
    """Each panel's baseline solve rate per epoch, one line per panel (train, val, test): does
    what the training keeps hold on tasks it never showed the proposer?"""
    import matplotlib

    with matplotlib.rc_context(RC):
        fig = _figure(7.5, 3.0)
        ax = fig.add_subplot()
        xs = [e["epoch"] for e in epochs]
        for panel in panels:
            rates = [
                r["rate"] if (v := e["panels"].get(panel)) and (r := v["baseline"]) else math.nan
                for e in epochs
            ]
            ax.plot(xs, rates, marker="o", label=f"{panel} panel", gid=f"panels-{panel}")
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel("solve rate")
        ax.set_xlabel("epoch")
        ax.set_xticks(xs)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        ax.set_title("the baseline's solve rate per panel")
    return fig


def heatmap(
    rows: list[str], columns: list[str], values: list[list[float | None]], title: str, gid: str
) -> Figure:
    """A rows × columns grid of fractions in [0, 1] (None: not measured), each cell labelled."""
    import matplotlib
    import numpy as np

    with matplotlib.rc_context(RC):
        fig = _figure(max(4.0, 1.0 + 0.75 * len(columns) + 1.6), max(2.0, 0.8 + 0.32 * len(rows)))
        ax = fig.add_subplot()
        data = np.array([[math.nan if v is None else v for v in row] for row in values], dtype=float).reshape(
            len(rows), len(columns)
        )
        cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#dddddd")
        image = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0, vmax=1, aspect="auto", gid=gid)
        ax.set_xticks(range(len(columns)), columns)
        ax.set_yticks(range(len(rows)), rows)
        for i in range(len(rows)):
            for j in range(len(columns)):
                v = data[i, j]
                ax.text(j, i, "–" if math.isnan(v) else f"{v:.0%}", ha="center", va="center", fontsize=7)
        ax.set_title(title)
        fig.colorbar(image, ax=ax, shrink=0.8, label="solved")
    return fig


def _tick_label(text: str, width: int) -> str:
    """``text`` broken after ``-``, ``/``, ``_`` or ``:`` into lines of at most ``width`` characters
    where it can be (a tick label under one group of bars, never reaching the next)."""
    parts = re.findall(r"[^-/_:]+[-/_:]?", text) or [text]
    lines = [""]
    for part in parts:
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def grouped_bars(
    groups: list[str],
    series: dict[str, list[float]],
    title: str,
    ylabel: str,
    gid: str,
    intervals: dict[str, list[tuple[float, float] | None]] | None = None,
) -> Figure:
    """One group of bars per model, one bar per harness (the "trained vs untrained per model"
    figure); ``intervals``: per series, each bar's [low, high] drawn as its error bar. Tick labels
    are broken into lines that fit their group; the legend sits inside the axes, above the bars
    (the y axis reaches past 100% to make room for it), so nothing is drawn outside the figure."""
    import matplotlib

    labels = [_tick_label(g, 18) for g in groups]
    longest = max((len(part) for label in labels for part in label.split("\n")), default=1)
    names = list(series)
    columns = max(1, min(len(names), 2 if max((len(n) for n in names), default=0) > 24 else 3))
    legend_rows = -(-len(names) // columns)
    with matplotlib.rc_context(RC):
        per_group = max(1.2, 0.075 * longest + 0.3)
        fig = _figure(max(4.5, 1.2 + per_group * len(groups)), 3.2 + 0.15 * legend_rows)
        ax = fig.add_subplot()
        width = 0.8 / max(len(series), 1)
        for n, (name, values) in enumerate(series.items()):
            xs = [g + (n - (len(series) - 1) / 2) * width for g in range(len(groups))]
            bars = ax.bar(xs, values, width, label=name, gid=f"{gid}-{n}")
            spans = (intervals or {}).get(name)
            if spans:
                drawn = [(x, v, s) for x, v, s in zip(xs, values, spans, strict=True) if s is not None]
                ax.errorbar(
                    [x for x, _, _ in drawn],
                    [v for _, v, _ in drawn],
                    yerr=[[v - s[0] for _, v, s in drawn], [s[1] - v for _, v, s in drawn]],
                    fmt="none",
                    ecolor="#333333",
                    elinewidth=0.8,
                    capsize=3,
                    gid=f"{gid}-interval-{n}",
                )
            ax.bar_label(bars, labels=[f"{v:.0%}" for v in values], fontsize=7, padding=2)
        ax.set_xticks(range(len(groups)), labels)
        ax.set_ylim(0, 1.14 + 0.11 * legend_rows)  # room above the 100% labels for the legend
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(loc="upper center", ncols=columns, fontsize=8, frameon=False, borderaxespad=0.2)
    return fig
