"""What the commands share: the common options (``--store``, ``--json``, ``--keep-going``,
``--record-mode`` values), opening the store, printing one JSON document."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Literal, Optional

import typer

RecordMode = Literal["once", "new_episodes", "none", "all"]

StoreOpt = typer.Option(None, "--store", help="Store folder (default: $REPLAYKIT_STORE or ./cassettes).")
JsonOpt = typer.Option(False, "--json", help="Print one JSON document for scripts.")
KeepGoingOpt = typer.Option(
    False,
    "--keep-going",
    help="On a model endpoint failure, mark the episode infra (not graded, re-recorded next run) and go on.",
)


def open_store(store: Optional[Path], readonly: bool = False) -> Any:
    """The store at --store / $REPLAYKIT_STORE / ./cassettes; ``readonly`` never creates nor writes it."""
    import atexit

    from replaykit.cassette.store import Store

    st = Store(store or Path(os.environ.get("REPLAYKIT_STORE", "cassettes")), readonly=readonly)
    atexit.register(st.close)
    return st


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
