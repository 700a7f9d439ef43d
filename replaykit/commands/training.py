"""``train``: the training loop of the ``replaykit`` command (measure, propose, judge, promote);
``transfer``: its harness, trained vs untrained, on other panels and models."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer

from replaykit import render
from replaykit.commands.options import (
    OVERRIDE_FLAGS,
    AcceptEngineOpt,
    ExecutorOpt,
    JsonOpt,
    KeepGoingOpt,
    Reuse,
    ReuseOpt,
    StoreOpt,
    emit_json,
    executor_override,
    model_overrides,
    open_store,
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
    cfg = load_config(config, overrides, OVERRIDE_FLAGS)
    with render.progress(enabled=not as_json) as progress:
        trainer = Trainer(config=cfg, record_mode=record_mode, progress=progress, keep_going=keep_going)
        resumed_before = len(trainer.recorded)
        for loss in trainer.epochs(epochs):
            loss.backward()
            trainer.optimizer.step()
    if as_json:
        emit_json(trainer.to_json())
        raise typer.Exit(1 if trainer.stopped else 0)
    from replaykit.train.panels import shown_epochs

    summary = trainer.summary()
    shown = shown_epochs(trainer.store, summary.epochs)  # solve rates per panel, from the runs
    ran = len(trainer.losses)  # show the epochs of this invocation; say how many were already recorded
    later = len(summary.epochs) - ran
    render.training_table(summary, epochs=ran, resumed=min(resumed_before, ran))
    render.panels_table(shown[:ran])
    if later > 0:
        render.line(
            f"{later} later epoch(s) recorded earlier are not shown (--epochs {len(summary.epochs)} shows them)"
        )
    render.wrapped(render.paid_line(trainer.paid.to_dict()))
    store_opt = f" --store {shlex.quote(cfg.store_location)}"
    render.line(f"stored in {cfg.store_location} · replaykit replay {summary.training_id}{store_opt}")
    render.line(f"see it in your browser: replaykit view{store_opt}")
    render.line(
        f"or as one offline HTML file: replaykit report {summary.training_id} -o report.html{store_opt}"
    )
    if trainer.stopped:
        render.wrapped(trainer.stopped)
        raise typer.Exit(1)


def transfer(
    training_id: str = typer.Argument(
        ..., help="The training whose harness to measure (a unique prefix is enough)."
    ),
    configs: list[Path] = typer.Option(
        ...,
        "--config",
        help="A run config whose panel, environment and model settings to measure on (repeatable).",
    ),
    models: str = typer.Option(
        ..., "--models", help="Comma-separated model names, e.g. reference-weak,reference-strong"
    ),
    agent: Optional[str] = typer.Option(
        None, "--agent", help="Also measure this named agent (replaykit/agents/), e.g. mini-swe-agent."
    ),
    endpoint: list[str] = typer.Option(
        [],
        "--endpoint",
        metavar="MODEL=URL",
        help="Where a model is served when not at the config's base_url, e.g. tiny=http://127.0.0.1:8081/v1 (repeatable).",
    ),
    record_mode: RecordMode = typer.Option(
        RecordMode.ONCE,
        "--record-mode",
        help="once: reuse stored episodes, record the missing; none: replay only; all: re-record.",
    ),
    reuse: Optional[Reuse] = ReuseOpt,
    store: Optional[str] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """The trained harness (the training's final baseline) vs the untrained one (its first
    baseline), and optionally a named agent, on each config's panel × each model: one table with
    paired intervals, stored as a transfer document that `replaykit report` draws."""
    from replaykit.core.errors import ConfigError
    from replaykit.episodes.config import load_config
    from replaykit.episodes.run import check_record_mode
    from replaykit.train.transfer import check_endpoints, check_models
    from replaykit.train.transfer import transfer as measure_transfer
    from replaykit.train.transfer_doc import transfer_json, transfer_table

    check_record_mode(record_mode)
    try:  # before any config is read or store opened
        names = check_models(models.split(","))
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--models") from None
    try:
        endpoints = check_endpoints(endpoint, names)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--endpoint") from None
    loaded = [load_config(c, model_overrides(reuse)) for c in configs]
    st = open_store(store or loaded[0].store_location, readonly=record_mode == RecordMode.NONE)
    with render.progress(enabled=not as_json) as progress:
        doc = measure_transfer(
            st, training_id, loaded, [str(c) for c in configs], names, agent, record_mode, progress, endpoints
        )
    if as_json:
        emit_json(transfer_json(st, doc))
        return
    render.transfer_table(doc, transfer_table(st, doc))
