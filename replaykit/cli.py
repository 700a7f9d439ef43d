"""The ``replaykit`` command: each command parses, calls one library function, renders.

Library errors (``ReplaykitError``) become ``Error: …`` and exit 1, here only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import click
import typer

from replaykit import render
from replaykit.errors import ReplaykitError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Train agent harnesses; record and replay every run.")
cassettes_app = typer.Typer(no_args_is_help=True, help="Inspect the cassette store.")
serve_app = typer.Typer(no_args_is_help=True, help="Run servers.")
app.add_typer(cassettes_app, name="cassettes")
app.add_typer(serve_app, name="serve")

StoreOpt = typer.Option(None, "--store", help="Store folder (default: $REPLAYKIT_STORE or ./cassettes).")
JsonOpt = typer.Option(False, "--json", help="Print one JSON document for scripts.")


def open_store(store: Optional[Path]) -> Any:
    from replaykit.cassette.store import Store

    return Store(store or Path(os.environ.get("REPLAYKIT_STORE", "cassettes")))


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


@app.command()
def run(
    config: Path = typer.Argument(..., help="YAML run config, e.g. configs/quickstart.yaml"),
    record_mode: str = typer.Option("once", "--record-mode", help="once | new_episodes | none | all"),
    harness: Optional[str] = typer.Option(None, "--harness", help="Harness ref to measure (default: baseline branch HEAD)."),
    model: Optional[str] = typer.Option(None, "--model", help="Override model.name from the config."),
    as_json: bool = JsonOpt,
) -> None:
    """Measure the harness on the panel, recording (or reusing) one cassette per episode."""
    from replaykit.config import load_config
    from replaykit.run import measure

    cfg = load_config(config, {"model.name": model} if model else None)
    with render.progress(enabled=not as_json) as progress:
        result = measure(cfg, record_mode=record_mode, harness_ref=harness, progress=progress)
    if as_json:
        emit_json(result.to_json())
    else:
        render.run_table(result.to_json())


@app.command()
def replay(
    run_id: str = typer.Argument(..., help="A run id (or a training id) from `replaykit run`/`train`."),
    harness: Optional[str] = typer.Option(None, "--harness", help="Replay the recorded responses against another harness ref."),
    harness_repo: Optional[Path] = typer.Option(None, "--harness-repo", help="Harness repo for --harness (default: the run's)."),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Replay a run offline (no network, no environment) and compare digests."""
    from replaykit.run import replay_run

    st = open_store(store)
    with render.progress(enabled=not as_json) as progress:
        report = replay_run(st, run_id, harness_ref=harness, repo_path=str(harness_repo) if harness_repo else None, progress=progress)
    if as_json:
        emit_json(report)
    else:
        render.replay_report(report)
    if not report["identical"]:
        raise typer.Exit(1)


@cassettes_app.command("ls")
def cassettes_ls(
    run_id: Optional[str] = typer.Option(None, "--run", help="Only the cassettes of this run."),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List cassettes (one row per episode)."""
    from replaykit.inspect import list_cassettes

    rows = list_cassettes(open_store(store), run_id)
    if as_json:
        emit_json(rows)
    else:
        render.cassette_rows(rows)


@cassettes_app.command("show")
def cassettes_show(
    cassette_id: str = typer.Argument(..., help="Cassette id (a unique prefix is enough)."),
    full: bool = typer.Option(False, "--full", help="Do not truncate bodies."),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Show one cassette's events in order."""
    from replaykit.inspect import show_cassette

    doc = show_cassette(open_store(store), cassette_id, full=full or as_json)
    if as_json:
        emit_json(doc)
    else:
        render.cassette_doc(doc, full=full)


@serve_app.command("reference")
def serve_reference(
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8765, "--port"),
    tasks: Optional[list[Path]] = typer.Option(None, "--tasks", help="Task folders the simulator knows (default: envs/*)."),
) -> None:
    """Run the reference model server (a deterministic simulator) until Ctrl-C."""
    from replaykit.models.reference.server import serve_forever

    render.err(f"reference model server on http://{host}:{port}/v1 (Ctrl-C to stop)")
    serve_forever(host, port, tasks)


def main() -> None:
    try:
        rv = app(standalone_mode=False)
    except ReplaykitError as exc:
        render.err(f"Error: {exc}")
        sys.exit(1)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        render.err("Aborted.")
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
