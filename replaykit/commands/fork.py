"""``fork``: continue a recorded episode live from step N with another model, harness, message or config."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from replaykit import render
from replaykit.commands.options import JsonOpt, StoreOpt, emit_json, open_store


def fork(
    cassette: str = typer.Argument(..., help="The episode's cassette id (a unique prefix is enough)."),
    at: int = typer.Option(
        ...,
        "--at",
        min=0,
        help="The step (model call, from 0) where the fork goes live; the calls before it are served.",
    ),
    model: Optional[str] = typer.Option(
        None, "--model", help="Continue with this model name from step N on."
    ),
    harness: Optional[str] = typer.Option(
        None,
        "--harness",
        help="Run this harness ref (it must repeat the first N steps) instead of the parent's.",
    ),
    message: Optional[Path] = typer.Option(
        None, "--message", help="A file whose text is given to the model as a user message at step N."
    ),
    config: Optional[Path] = typer.Option(
        None,
        "--config",
        help="Continue under this run config (its store, endpoint, params, env, harness repo).",
    ),
    store: Optional[str] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Fork an episode at step N: serve its first N model calls, then continue live with the change."""
    from replaykit.core.errors import ConfigError
    from replaykit.episodes.config import load_config
    from replaykit.episodes.fork import ForkChange, fork_episode

    text = None
    if message is not None:
        try:
            text = message.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--message {message}: cannot read it as UTF-8 text ({exc})") from None
    cfg = load_config(config, {"model.name": model} if model else None) if config else None
    st = open_store(store, config=config)
    result = fork_episode(st, cassette, at, ForkChange(model, harness, text, cfg))
    if as_json:
        emit_json(result)
        return
    render.fork_report(result)
