"""``run`` and ``compare``: measure a panel (or every harness × model cell), recording or
reusing one cassette per episode, and print the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from replaykit import render
from replaykit.commands.options import (
    OVERRIDE_FLAGS,
    AcceptEngineOpt,
    AgentTimeoutMultiplierOpt,
    BuildTimeoutMultiplierOpt,
    ExecutorOpt,
    JsonOpt,
    KeepGoingOpt,
    OverrideCpusOpt,
    OverrideMemoryOpt,
    OverrideStorageOpt,
    Reuse,
    ReuseOpt,
    TimeoutMultiplierOpt,
    VerifierTimeoutMultiplierOpt,
    emit_json,
    executor_override,
    limit_overrides,
    model_overrides,
)
from replaykit.core.modes import RecordMode


def run(
    config: Path = typer.Argument(..., help="YAML run config, e.g. configs/quickstart.yaml"),
    record_mode: RecordMode = typer.Option(
        RecordMode.ONCE,
        "--record-mode",
        help="once: reuse stored episodes, record the missing; none: replay only; all: re-record.",
    ),
    harness: Optional[str] = typer.Option(
        None, "--harness", help="Harness ref to measure (default: baseline branch HEAD)."
    ),
    model: Optional[str] = typer.Option(None, "--model", help="Override model.name from the config."),
    agent: Optional[str] = typer.Option(
        None,
        "--agent",
        help="Run a named agent as the harness (harness.agent: mini-swe-agent, ...; `replaykit plugins` lists them).",
    ),
    keep_going: bool = KeepGoingOpt,
    accept_engine_change: bool = AcceptEngineOpt,
    executor: Optional[str] = ExecutorOpt,
    timeout_multiplier: Optional[float] = TimeoutMultiplierOpt,
    agent_timeout_multiplier: Optional[float] = AgentTimeoutMultiplierOpt,
    verifier_timeout_multiplier: Optional[float] = VerifierTimeoutMultiplierOpt,
    build_timeout_multiplier: Optional[float] = BuildTimeoutMultiplierOpt,
    override_cpus: Optional[float] = OverrideCpusOpt,
    override_memory_mb: Optional[int] = OverrideMemoryOpt,
    override_storage_mb: Optional[int] = OverrideStorageOpt,
    jobs_dir: Optional[Path] = typer.Option(
        None,
        "--jobs-dir",
        help="Also write the run as Harbor's job folder there (result.json per trial and job; `harbor view DIR`).",
    ),
    reuse: Optional[Reuse] = ReuseOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Measure the harness on the panel, recording (or reusing) one cassette per episode.

    --agent NAME: a named agent (mini-swe-agent, codex, terminus) is the harness, keyed by its SHA."""
    from replaykit.episodes.config import load_config
    from replaykit.report.harbor_jobs import measure_run

    overrides: dict[str, object] = {"model.name": model} if model else {}
    if agent:
        overrides["harness.agent"] = agent
    overrides.update(
        limit_overrides(
            timeout_multiplier,
            agent_timeout_multiplier,
            verifier_timeout_multiplier,
            build_timeout_multiplier,
            override_cpus,
            override_memory_mb,
            override_storage_mb,
        )
    )
    overrides.update(model_overrides(reuse, accept_engine_change))
    overrides.update(executor_override(executor))
    cfg = load_config(config, overrides, OVERRIDE_FLAGS)
    with render.progress(enabled=not as_json) as progress:
        result = measure_run(  # with --jobs-dir: refused before anything is recorded
            cfg,
            jobs_dir,
            record_mode=record_mode,
            harness_ref=harness,
            progress=progress,
            keep_going=keep_going,
        )
    if as_json:
        emit_json(result.to_json())
    else:
        render.run_table(result)
        render.line(
            f"stored in {cfg.store_location} · replaykit replay {result.run.run_id} --config {config}"
        )
        if result.harbor_job:
            render.harbor_jobs(result.harbor_job)


def _listed(what: str, example: str) -> Any:
    """A callback refusing a comma-separated option that names nothing (before any other check)."""

    def check(value: str | None) -> str | None:
        if value is not None and not [v for v in value.split(",") if v.strip()]:
            raise typer.BadParameter(f"names no {what}; give at least one, e.g. {example}")
        return value

    return check


def compare(
    config: Path = typer.Argument(..., help="YAML run config."),
    models: str = typer.Option(
        ...,
        "--models",
        help="Comma-separated model names, e.g. reference-weak,reference-strong",
        callback=_listed("model", "--models reference-weak,reference-strong"),
    ),
    harness: str = typer.Option(
        ...,
        "--harness",
        callback=_listed("harness", "--harness untrained=INITIAL_SHA,trained=main"),
        help="Comma-separated harness refs, each optionally named by its role: untrained=<initial-sha>,trained=main; agent:NAME is a named agent (mini=agent:mini-swe-agent)",
    ),
    record_mode: RecordMode = typer.Option(
        RecordMode.ONCE,
        "--record-mode",
        help="once: reuse stored cells, record the missing; none: replay only; all: re-record.",
    ),
    reuse: Optional[Reuse] = ReuseOpt,
    executor: Optional[str] = ExecutorOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Measure (or reuse) every harness × model cell and print the solve-rate table."""
    from replaykit.episodes.compare import compare as compare_cells
    from replaykit.episodes.config import load_config
    from replaykit.episodes.run import check_record_mode

    check_record_mode(record_mode)
    with render.progress(enabled=not as_json) as progress:
        report = compare_cells(
            load_config(config, {**model_overrides(reuse), **executor_override(executor)}, OVERRIDE_FLAGS),
            [m.strip() for m in models.split(",") if m.strip()],
            [h.strip() for h in harness.split(",") if h.strip()],
            record_mode,
            progress=progress,
        )
    emit_json(report.to_json()) if as_json else render.compare_table(report)
