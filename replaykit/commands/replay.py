"""``replay``: replay a run or a whole training offline and compare (exit 1 if it diverged)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from replaykit import render
from replaykit.commands.options import (
    ConfigStoreOpt,
    ExecutorOpt,
    JsonOpt,
    StoreOpt,
    TasksOpt,
    emit_json,
    open_store,
    task_sources,
)

if TYPE_CHECKING:
    from replaykit.cassette.backend import RunStore
    from replaykit.execution.settings import Executor


def replay(
    run_id: str = typer.Argument(
        ..., help="A run id (or a training id) from `replaykit run`/`train`, or a cassette id (a fork's)."
    ),
    harness: Optional[str] = typer.Option(
        None, "--harness", help="Replay the recorded responses against another harness ref."
    ),
    harness_repo: Optional[Path] = typer.Option(
        None,
        "--harness-repo",
        help="Harness repo to find --harness in (default: --config's harness.repo; never the path the run recorded).",
    ),
    workers: Optional[int] = typer.Option(
        None, "--workers", min=1, max=1024, help="Replay episodes in N local processes."
    ),
    ray: Optional[str] = typer.Option(
        None, "--ray", help="Replay episodes as Ray tasks: auto | ray://host:10001 | local."
    ),
    executor: Optional[str] = ExecutorOpt,
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Replay a run, a whole training or one cassette offline (no network, no environment) and compare."""
    from replaykit.core.errors import CassetteNotFound
    from replaykit.episodes.replay import replay_cassette, replay_run
    from replaykit.execution.select import cli_executor

    st = open_store(store, readonly=True, config=config)
    if harness and harness_repo is None and config is not None:
        from replaykit.episodes.config import load_config

        harness_repo = load_config(config).repo_path  # the current config's repo, not the recorded one
    chosen = cli_executor(workers, ray, executor)
    try:
        kind = st.doc_kind(run_id)
    except CassetteNotFound:
        kind = (
            "cassette" if st.has(st.resolve_id("cassettes", run_id, what="run, training or cassette")) else ""
        )
    if kind in ("fork", "cassette"):
        report = replay_cassette(st, run_id, harness, str(harness_repo) if harness_repo else None)
        emit_json(report) if as_json else render.replay_report(report)
        if not report["identical"]:
            raise typer.Exit(1)
        return
    from replaykit.exchange.bundle_format import COMPARISON_KINDS  # the store package: not at start-up

    if kind in COMPARISON_KINDS:
        identical = replay_comparison(st, run_id, kind, chosen, as_json)
    elif kind == "training":
        from replaykit.train.audit import replay_training

        with render.progress(enabled=not as_json) as progress:
            training = replay_training(st, run_id, progress=progress, executor=chosen)
        emit_json(training) if as_json else render.training_replay(training)
        identical = bool(training["identical"])
    else:
        with render.progress(enabled=not as_json) as progress:
            report = replay_run(
                st,
                run_id,
                harness_ref=harness,
                repo_path=str(harness_repo) if harness_repo else None,
                progress=progress,
                executor=chosen,
            )
        emit_json(report) if as_json else render.replay_report(report)
        identical = report["identical"]
    if not identical:
        raise typer.Exit(1)


def replay_comparison(st: RunStore, doc_id: str, kind: str, chosen: Executor | None, as_json: bool) -> bool:
    """``replay COMPARE_ID``: the document recomputed from its runs, then every run it reads
    replayed; identical when every one is."""
    from replaykit.train.audit import replay_document

    with render.progress(enabled=not as_json) as progress:
        replayed = replay_document(st, doc_id, kind, progress=progress, executor=chosen)
    full, reports, identical = replayed["id"], replayed["runs"], replayed["identical"]
    if as_json:
        emit_json(replayed)
        return identical
    for report in reports:
        render.replay_report(report)
    done = sum(r["identical"] for r in reports)
    render.line(
        f"{kind} {full}: "
        + ("identical" if identical else f"DIVERGED ({done}/{len(reports)} runs identical)")
    )
    return identical


def regrade(
    run_id: str = typer.Argument(..., help="A run id from `replaykit run` (or `replaykit runs`)."),
    tests: Optional[list[str]] = typer.Option(
        None, "--tests", help="TASK=DIR: grade that task with DIR as its tests/ folder (repeatable)."
    ),
    tasks: Optional[list[str]] = TasksOpt,
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run each episode's verifier again on its recorded final state (no model call) into a new run."""
    from replaykit.episodes.regrade import parse_tests, regrade_run

    swapped = parse_tests(tests)  # checked before the store is opened for writing
    st = open_store(store, config=config)
    sources = task_sources(st, tasks, config)
    with render.progress(enabled=not as_json) as progress:
        report = regrade_run(st, run_id, swapped, sources, progress)
    emit_json(report) if as_json else render.regrade_report(report)
    if not swapped and not report["reproduced"]:
        raise typer.Exit(1)  # the recorded verifiers gave other grades: say so in the exit code
