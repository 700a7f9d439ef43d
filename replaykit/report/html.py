"""Render a report as ONE self-contained static HTML file (Jinja2; charts inline as SVG).

No CDN, no script, no external resource: the file works offline from ``file://``
(a Content-Security-Policy forbids any fetch). Links are in-page anchors: each
episode's transcript and each regression/new-solve diff opens when its link is followed.

    summary = write_report(store, "a1b2c3", Path("report.html"), png_dir=Path("figs"))
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from replaykit.cassette.backend import BrowseStore
from replaykit.core.errors import ReplaykitError
from replaykit.core.files import write_atomic
from replaykit.report import charts
from replaykit.report.build import build
from replaykit.report.documents import ReportContext
from replaykit.report.transcript import OUTPUT_CAP

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class ReportSummary(TypedDict):
    """What ``report ID`` says it wrote (and prints with ``--json``)."""

    id: str
    kind: str
    path: str
    bytes: int
    charts: list[str]  # the figures' names, inlined as SVG
    pngs: list[str]  # the PNG files written (``--png DIR``)
    runs: int
    transcripts: int
    diffs: int


def render(ctx: ReportContext, figures: Mapping[str, Figure]) -> str:
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("replaykit.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    from replaykit.core.glossary import TERMS, epoch_names

    env.filters["epochs"] = epoch_names  # e0, e2: one wording in CLI, report and viewer
    env.globals["TERMS"] = TERMS  # tooltips on the column headers, and the legend
    svgs = {name: Markup(charts.svg(fig)) for name, fig in figures.items()}
    return env.get_template("report.html.j2").render(ctx=ctx, charts=svgs)


def write_report(
    store: BrowseStore,
    report_id: str,
    output: Path,
    png_dir: Path | None = None,
    cap: int | None = OUTPUT_CAP,
) -> ReportSummary:
    """Build and write the report of a training, run, verdict or compare result; optionally
    the charts as PNG. Each output shown is cut to ``cap`` bytes (None: in full)."""
    if output.exists() and output.is_dir():
        raise ReplaykitError(f"report output {output} is a folder; give a file name such as report.html")
    ctx, figures = build(store, report_id, cap)
    html = render(ctx, figures).encode("utf-8")
    write_atomic(output, html)
    pngs = (
        [str(charts.save_png(fig, png_dir / f"{name}.png")) for name, fig in figures.items()]
        if png_dir
        else []
    )
    return {
        "id": ctx["id"],
        "kind": ctx["kind"],
        "path": str(output),
        "bytes": len(html),
        "charts": sorted(figures),
        "pngs": pngs,
        "runs": len(ctx["runs"]),
        "transcripts": len(ctx["transcripts"]),
        "diffs": len(ctx["diffs"]),
    }
