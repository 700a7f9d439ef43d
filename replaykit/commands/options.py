"""What the commands share: the common options (``--store``, ``--json``, ``--keep-going``,
``--record-mode`` values), opening the store, printing one JSON document."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

if TYPE_CHECKING:
    from replaykit.cassette.backend import StoreBackend


StoreOpt = typer.Option(
    None,
    "--store",
    help="Store: a folder, sqlite:PATH or postgresql://… (default: $REPLAYKIT_STORE or ./cassettes).",
)
JsonOpt = typer.Option(False, "--json", help="Print one JSON document for scripts.")
KeepGoingOpt = typer.Option(
    False,
    "--keep-going",
    help="On a model endpoint failure, mark the episode infra (not graded, re-recorded next run) and go on.",
)

AcceptEngineOpt = typer.Option(
    False,
    "--accept-engine-change",
    help="Reuse cassettes recorded under another engine identity (what the endpoint reports about itself).",
)


def open_store(store: Optional[str | Path], readonly: bool = False) -> StoreBackend:
    """The store at --store / $REPLAYKIT_STORE / ./cassettes (a folder, ``sqlite:PATH`` or a
    backend URL such as ``postgresql://…``); ``readonly`` never creates nor writes it."""
    import atexit

    from replaykit.cassette.stores import open_store as open_location

    st = open_location(store or os.environ.get("REPLAYKIT_STORE") or "cassettes", readonly=readonly)
    atexit.register(st.close)
    return st


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
