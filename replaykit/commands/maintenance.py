"""``doctor``, ``plugins``, ``cassettes rm`` and ``gc``: thin mirrors of
``replaykit.workspace.doctor``, ``replaykit.workspace.plugins`` and ``replaykit.exchange.gc``
(registered with one line each in ``replaykit/cli.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from replaykit import render
from replaykit.commands.options import (
    ConfigStoreOpt,
    JsonOpt,
    StoreOpt,
    WideOpt,
    emit_json,
    open_store,
    wide_layout,
)


def doctor(
    config: Optional[Path] = typer.Argument(
        None, help="A run config to check (harness repo, endpoint, key); optional."
    ),
    store: Optional[str] = typer.Option(
        None,
        "--store",
        help="Store to check: a folder, sqlite:PATH or postgresql://… (default: the config's, else $REPLAYKIT_STORE or ./cassettes).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Check Docker, the base image, the store, the harness repo (and a named agent's program), the endpoint and its key: one line each, with the fix."""
    from replaykit.workspace.doctor import diagnose

    report = diagnose(config, store)
    emit_json(report) if as_json else render.doctor_report(report)
    if not report["ok"]:
        raise typer.Exit(1)


def plugins(wide: bool = WideOpt, as_json: bool = JsonOpt) -> None:
    """List what every extension point has registered (env kinds, executors, estimators, backends, criteria, optimizers) and where each comes from: built-in, or which installed package's entry point."""
    from replaykit.workspace.plugins import plugins_report

    wide_layout(wide)
    report = plugins_report()
    emit_json(report) if as_json else render.plugins_report(report)


def cassettes_rm(
    ids: list[str] = typer.Argument(
        ..., help="Run, training, verdict or cassette ids (unique prefixes are enough)."
    ),
    recursive: bool = typer.Option(
        False,
        "--recursive",
        "-r",
        help="Also remove what the named documents reference, unless a kept document references it.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="List what would be removed; change nothing."
    ),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Remove documents or cassettes (refused while a kept document references them), then their unreferenced blobs."""
    from replaykit.exchange.gc import remove

    report = remove(open_store(store, config=config), ids, recursive=recursive, dry_run=dry_run)
    emit_json(report) if as_json else render.removal_report(report)


def gc(
    dry_run: bool = typer.Option(
        False, "--dry-run", "-n", help="List what would be removed; change nothing."
    ),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Remove blobs and harness trees that no run, training, verdict or cassette references."""
    from replaykit.exchange.gc import remove

    report = remove(open_store(store, config=config), [], dry_run=dry_run)
    emit_json(report) if as_json else render.removal_report(report)
