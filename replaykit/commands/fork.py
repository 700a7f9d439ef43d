"""``fork``: continue a recorded episode live from call N+1 with another model, harness, message or config."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from replaykit import render
from replaykit.commands.options import (
    OVERRIDE_FLAGS,
    JsonOpt,
    StoreOpt,
    TasksOpt,
    emit_json,
    open_store,
    task_sources,
)


def fork(
    cassette: str = typer.Argument(..., help="The episode's cassette id (a unique prefix is enough)."),
    at: int = typer.Option(
        ...,
        "--at",
        min=0,
        help="Serve the first N model calls; the fork goes live at call N+1 (calls count from 1, as shown).",
    ),
    model: Optional[str] = typer.Option(
        None, "--model", help="Continue with this model name from call N+1 on."
    ),
    harness: Optional[str] = typer.Option(
        None,
        "--harness",
        help="Run this harness ref (it must repeat the first N calls) instead of the parent's.",
    ),
    message: Optional[Path] = typer.Option(
        None, "--message", help="A file whose text is given to the model as a user message before call N+1."
    ),
    config: Optional[Path] = typer.Option(
        None,
        "--config",
        help="Continue under this run config (its store, endpoint, params, env, harness repo).",
    ),
    harness_repo: Optional[Path] = typer.Option(
        None,
        "--harness-repo",
        help="The harness repo to find --harness in (default: --config's harness.repo; never the one recorded).",
    ),
    tasks: Optional[list[str]] = TasksOpt,
    store: Optional[str] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Fork an episode at call N+1: serve its first N model calls, then continue live with the change."""
    from replaykit.core.errors import ConfigError
    from replaykit.episodes.config import load_config
    from replaykit.episodes.fork import ForkChange, fork_episode

    if harness and harness_repo is None and config is None:  # never the repo a run recorded
        raise typer.BadParameter(
            f"--harness {harness} needs the harness repository to find it in: add --harness-repo PATH "
            "or --config CFG (its harness.repo)",
            param_hint="'--harness'",
        )
    text = None
    if message is not None:
        if not message.is_file():
            what = "is a folder" if message.is_dir() else "no such file"
            raise ConfigError(f"--message {message}: {what}; give a text file holding the message")
        try:
            text = message.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(
                f"--message {message}: not UTF-8 text; give a text file holding the message"
            ) from None
        except OSError as exc:
            raise ConfigError(f"--message {message}: cannot read it ({exc.strerror})") from None
    cfg = load_config(config, {"model.name": model} if model else None, OVERRIDE_FLAGS) if config else None
    st = open_store(store, config=config)
    sources = task_sources(st, tasks, config)
    repo = harness_repo.expanduser().absolute() if harness_repo else None
    result = fork_episode(st, cassette, at, ForkChange(model, harness, text, cfg, repo), sources)
    if as_json:
        emit_json(result)
        return
    render.fork_report(result)
