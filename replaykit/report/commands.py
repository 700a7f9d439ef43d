"""CLI commands of the report layer (registered with one line each in ``replaykit/cli.py``).

Each parses its options, calls one library function, prints JSON or renders.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer

StoreOpt = typer.Option(None, "--store", help="Store folder (default: $REPLAYKIT_STORE or ./cassettes).")
JsonOpt = typer.Option(False, "--json", help="Print one JSON document for scripts.")


def open_store(store: Optional[Path]) -> Any:
    from replaykit.cassette.store import Store

    return Store(store or Path(os.environ.get("REPLAYKIT_STORE", "cassettes")))


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def show_transcript(store: Any, cassette_id: str, as_json: bool) -> None:
    """``cassettes show ID --transcript``."""
    from replaykit.report import terminal
    from replaykit.report.transcript import show_transcript as build

    doc = build(store, cassette_id)
    emit_json(doc) if as_json else terminal.transcript(doc)


def cassettes_diff(
    a: str = typer.Argument(
        ..., help="First cassette id (e.g. the baseline's episode; a unique prefix is enough)."
    ),
    b: str = typer.Argument(
        ..., help="Second cassette id (e.g. the candidate's episode on the same task and seed)."
    ),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Align two episodes call by call and step by step; show the first point where they part."""
    from replaykit.report import terminal
    from replaykit.report.diff import diff_cassettes

    doc = diff_cassettes(open_store(store), a, b)
    emit_json(doc) if as_json else terminal.episode_diff(doc)


def report(
    report_id: str = typer.Argument(
        ..., help="A training, run, verdict or compare id (a unique prefix is enough)."
    ),
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="The HTML file to write."),
    png: Optional[Path] = typer.Option(None, "--png", help="Also write each chart as PNG into this folder."),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Write one self-contained offline HTML report (curve, verdicts, diffs, grids, transcripts)."""
    from replaykit.report.html import write_report

    summary = write_report(open_store(store), report_id, output, png)
    if as_json:
        emit_json(summary)
        return
    from replaykit.report import terminal

    terminal._print(
        f"wrote {summary['kind']} report {summary['id']} to {summary['path']} ({summary['bytes']} bytes): "
        f"{summary['runs']} run(s), {summary['transcripts']} transcript(s), {summary['diffs']} diff(s)"
        + (f"; charts as PNG in {png}" if png else "")
    )
