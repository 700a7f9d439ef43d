"""``runs``, ``cassettes ls`` and ``cassettes show``: read what the store holds (never writes it)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import typer

from replaykit import render
from replaykit.commands.options import (
    ConfigStoreOpt,
    JsonOpt,
    OutputCapOpt,
    StoreOpt,
    WideOpt,
    emit_json,
    open_store,
    wide_layout,
)


def runs(
    kind: Optional[
        Literal["measure", "training", "verdict", "compare", "fork", "probe", "transfer"]
    ] = typer.Option(None, "--kind", help="Only documents of this kind."),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    wide: bool = WideOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List runs, trainings, verdicts, compare results, forks and probes in the store (newest
    last); each measured run with its replicate statistics (pass@k, pass^k, seed disagreement),
    the model calls recording its episodes paid and the events they were served from donors; each
    training and fork with the same two counts of its episodes (a training's proposer's too)."""
    from replaykit.train.run_listing import list_runs

    wide_layout(wide)
    st = open_store(store, readonly=True, config=config)
    rows = list_runs(st, kind)
    if as_json:
        return emit_json(rows)
    everything = rows if kind is None else st.list_runs()  # ids shortened among all the store's
    render.run_rows(rows, [r["id"] for r in everything])
    render.damaged(rows)


def cassettes_ls(
    run_id: Optional[str] = typer.Option(None, "--run", help="Only the cassettes of this run."),
    limit: Optional[int] = typer.Option(
        None, "--limit", "-n", min=0, help="Only the newest N (default: 100 in the table, all with --json)."
    ),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    wide: bool = WideOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List cassettes (one row per episode), oldest first."""
    from replaykit.episodes.listing import count_cassettes, list_cassettes

    wide_layout(wide)
    st = open_store(store, readonly=True, config=config)
    if limit is None and not as_json:
        limit = 100
    rows = list_cassettes(st, run_id, limit)
    if as_json:
        emit_json(rows)
    else:
        render.cassette_rows(rows, total=count_cassettes(st, run_id))


def cassettes_show(
    cassette_id: str = typer.Argument(..., help="Cassette id (a unique prefix is enough)."),
    full: bool = typer.Option(False, "--full", help="Do not truncate bodies."),
    transcript: bool = typer.Option(
        False, "--transcript", help="As a conversation: each call's new messages, replies, env steps, grade."
    ),
    output_cap: int = OutputCapOpt,
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Show one cassette's events in order."""
    from replaykit.episodes.views import show_cassette

    if transcript:
        from replaykit.commands import report as report_cmd

        return report_cmd.show_transcript(
            open_store(store, readonly=True, config=config),
            cassette_id,
            as_json,
            None if full else output_cap,
        )
    doc = show_cassette(open_store(store, readonly=True, config=config), cassette_id, full=full or as_json)
    if as_json:
        emit_json(doc)
    else:
        render.cassette_doc(doc, full=full)


def net_ls(
    target: str = typer.Argument(..., help="A run id or a cassette id (a unique prefix is enough)."),
    store: Optional[str] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List what task containers fetched through the frozen network: URL, status, size, fetched or served."""
    from replaykit.episodes.network import net_listing

    doc = net_listing(open_store(store, readonly=True), target)
    emit_json(doc) if as_json else render.net_rows(doc)
