"""``train``: the training loop of the ``replaykit`` command (measure, propose, judge, promote)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer

from replaykit import render
from replaykit.commands.options import (
    AcceptEngineOpt,
    ExecutorOpt,
    JsonOpt,
    KeepGoingOpt,
    Reuse,
    ReuseOpt,
    emit_json,
    executor_override,
    model_overrides,
)
from replaykit.core.modes import RecordMode


def train(
    config: Path = typer.Argument(
        ..., help="YAML config with a train: section, e.g. configs/quickstart.yaml"
    ),
    epochs: Optional[int] = typer.Option(
        None, "--epochs", min=1, help="Number of epochs (default: train.epochs)."
    ),
    record_mode: RecordMode = typer.Option(
        RecordMode.ONCE,
        "--record-mode",
        help="once: reuse stored episodes, record the missing; none: replay only; all: re-record.",
    ),
    keep_going: bool = KeepGoingOpt,
    accept_engine_change: bool = AcceptEngineOpt,
    reuse: Optional[Reuse] = ReuseOpt,
    executor: Optional[str] = ExecutorOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Train the harness: measure, propose, measure, judge, promote — every call recorded."""
    from replaykit.episodes.config import load_config
    from replaykit.episodes.run import check_record_mode
    from replaykit.train.trainer import Trainer

    check_record_mode(record_mode)
    overrides = model_overrides(reuse, accept_engine_change)
    overrides.update(executor_override(executor))
    cfg = load_config(config, overrides)
    with render.progress(enabled=not as_json) as progress:
        trainer = Trainer(config=cfg, record_mode=record_mode, progress=progress, keep_going=keep_going)
        resumed_before = len(trainer.recorded)
        for loss in trainer.epochs(epochs):
            loss.backward()
            trainer.optimizer.step()
    summary = trainer.summary()
    if as_json:
        emit_json({**summary, **trainer.paid.to_dict(), "store": cfg.store_location})
        return
    ran = len(trainer.losses)  # show the epochs of this invocation; say how many were already recorded
    later = len(summary["epochs"]) - ran
    render.training_table(
        {**summary, "epochs": summary["epochs"][:ran], "resumed_epochs": min(resumed_before, ran)}
    )
    if later > 0:
        render.line(
            f"{later} later epoch(s) recorded earlier are not shown (--epochs {len(summary['epochs'])} shows them)"
        )
    render.line(render.paid_line(trainer.paid.to_dict()))
    store_opt = f" --store {shlex.quote(cfg.store_location)}"
    render.line(f"stored in {cfg.store_location} · replaykit replay {summary['training_id']}{store_opt}")
    render.line(f"see it in your browser: replaykit view{store_opt}")
    render.line(
        f"or as one offline HTML file: replaykit report {summary['training_id']} -o report.html{store_opt}"
    )
