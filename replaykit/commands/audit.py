"""``replaykit audit ID``: the CLI mirror of the audits (verdicts and trainings), and their rendering.

- ``audit VERDICT [--criterion X]``: recompute a verdict offline (``audit.audit``);
- ``audit VERDICT --resample-seeds K [--bootstrap N]``: seed-robustness (``robustness``);
- ``audit TRAINING [--criterion X] [--optimizer Y] [--record]``: counterfactual training (``counterfactual``);
- ``audit TRAINING --sweep criteria=a,b --sweep optimizers=c,d``: a sweep table (``sweep``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

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
from replaykit.core.errors import ConfigError
from replaykit.core.glossary import epoch_names

if TYPE_CHECKING:
    from rich.text import Text

    from replaykit.train.audit_records import (
        CounterfactualReport,
        RecordedAudit,
        SeedRobustness,
        SolveRate,
        SweepReport,
    )


def _sha(value: Any) -> str:
    return str(value)[:10] if value else "-"


def _rate(final: SolveRate) -> str:
    if final.get("solved") is None:
        return "unknown"
    return f"{final['solved']}/{final['total']} ({final['solve_rate']:.0%})"


def counterfactual_table(rep: CounterfactualReport) -> None:
    """Short cells in the table (≠ marks what differs from the recorded training); reasons below, in full."""
    rows: list[list[str | Text]] = []
    notes = []
    for r in rep["epochs"]:
        moved = r["counterfactual_baseline"] and r["counterfactual_baseline"] != r["recorded_baseline"]
        rows.append(
            [
                str(r["epoch"]),
                r["recorded_decision"],
                r["counterfactual_decision"] + (" ≠" if r["flipped"] else ""),
                _sha(r["counterfactual_baseline"]) + (" ≠" if moved else ""),
                _sha(r["counterfactual_candidate"]) + (" *" if r["reapplied"] else ""),
                "yes" if r["offline"] else "no",
            ]
        )
        if r["reason"]:
            notes.append(f"epoch {r['epoch']}: {r['reason']}")
    render.line(
        f"recorded: {rep['recorded_criterion']['name']} × {rep['recorded_optimizer']['name']} · "
        f"counterfactual: {rep['criterion']['spec']} × {rep['optimizer']['spec']}"
    )
    render.show_table(
        f"counterfactual of training {rep['training_id']}",
        ["epoch", "recorded", "counterfactual", "cf baseline", "cf candidate", "offline"],
        rows,
    )
    render.line("≠ differs from the recorded training · * recorded proposal re-applied to another baseline")
    for note in notes:
        render.line(note)
    rec, cf = rep["final"]["recorded"], rep["final"]["counterfactual"]
    shown = (
        f"{_sha(cf['sha'])} solves {_rate(cf)}"
        if cf["determined"]
        else f"undetermined (last known {_sha(cf['last_known'])})"
    )
    render.line(f"final baseline: recorded {_sha(rec['sha'])} solves {_rate(rec)} · counterfactual {shown}")
    flipped = ", ".join(map(str, rep["flipped"])) or "none"
    render.line(
        f"epochs decided otherwise: {flipped} · computable offline: {rep['offline_epochs']}/{len(rep['epochs'])} epoch(s)"
    )
    if rep["reapplied"]:
        render.line(f"approximation: {rep['approximation']}")
    if rep["needs_recording"]:
        render.line(
            f"to continue, record these {len(rep['needs_recording'])} episode(s) (or rerun with --record):"
        )
        for m in rep["needs_recording"]:
            render.line(
                f"  epoch {m['epoch']} {m['role']}: {m['task_id']} seed {m['seed']} harness {m['harness_sha'][:10]} "
                f"(key {m['cassette_id']})"
            )
    elif rep["reproduces_recorded"]:
        render.line("reproduces the recorded training: every decision and the final baseline")


def sweep_table(rep: SweepReport) -> None:
    rows: list[list[str | Text]] = []
    for c in rep["cells"]:
        final = _sha(c["final_baseline"]) if c["complete"] else f"? after {_sha(c['last_known_baseline'])}"
        rate = (
            "unknown"
            if c["final_solved"] is None
            else f"{c['final_solved']}/{c['final_total']} ({c['final_solve_rate']:.0%})"
        )
        rows.append(
            [
                c["criterion"] + (" (recorded)" if c["recorded"] else ""),
                c["optimizer"],
                epoch_names(c["accepted_epochs"]),
                final,
                rate,
                f"{c['offline_share']:.0%}",
                "-" if c["p_value"] is None else f"{c['p_value']:.3f}",
                "-" if c["p_bh"] is None else f"{c['p_bh']:.3f}",
            ]
        )
    render.show_table(
        f"sweep of training {rep['training_id']} (criterion × optimizer)",
        ["criterion", "optimizer", "accepted epochs", "final baseline", "solve rate", "offline", "p", "BH q"],
        rows,
    )
    from replaykit.render.console import wrapped  # here: every command's start-up imports this module

    wrapped(
        "p = exact McNemar p (one-sided) that the final baseline solves more than the initial one · "
        "BH q = p adjusted over the cells (Benjamini–Hochberg)"
    )
    rec = rep["recorded_final"]
    render.line(f"recorded final baseline {_sha(rec['sha'])} solves {_rate(rec)}")


def robustness_table(rep: SeedRobustness) -> None:
    rows: list[list[str | Text]] = [
        [",".join(map(str, s["seeds"])), "accept" if s["accept"] else "reject", "yes" if s["holds"] else "NO"]
        for s in rep["samples"]
    ]
    render.line(f"{rep['criterion']['name']} on seed subsets of verdict {rep['verdict_id']}")
    render.show_table(
        "",
        ["seeds", "decision", "holds"],
        rows,
    )
    for s in rep["samples"]:
        render.line(f"seeds {','.join(map(str, s['seeds']))}: {s['reason']}")
    render.line(rep["summary"])


def audit(
    target: str = typer.Argument(
        ...,
        metavar="ID",
        help="A verdict id or a training id (from `replaykit train --json` or `replaykit runs`).",
    ),
    criterion: Optional[str] = typer.Option(
        None, "--criterion", help="Judge with this criterion: NAME[:key=value,...]."
    ),
    optimizer: Optional[str] = typer.Option(
        None, "--optimizer", help="Training only: step with this optimizer: NAME[:key=value,...]."
    ),
    record: bool = typer.Option(
        False, "--record", help="Training only: continue the counterfactual live (records what is missing)."
    ),
    sweep: Optional[list[str]] = typer.Option(
        None, "--sweep", help="Training only: criteria=a,b or optimizers=c,d (repeatable)."
    ),
    noise: bool = typer.Option(
        False, "--noise", help="Training only: each epoch's noise floor and whether its verdict is within it."
    ),
    workspace: bool = typer.Option(
        False,
        "--workspace",
        help="Training only: what the proposer saw: each epoch's workspace digest and files (with --epoch: one).",
    ),
    epoch: Optional[int] = typer.Option(None, "--epoch", min=0, help="With --workspace: this epoch only."),
    resample_seeds: Optional[int] = typer.Option(
        None,
        "--resample-seeds",
        min=1,
        max=10_000,
        help="Verdict: recompute on every subset of K seeds. Training with --noise: record N extra seeds first (once).",
    ),
    bootstrap: Optional[int] = typer.Option(
        None,
        "--bootstrap",
        min=1,
        max=1_000_000,
        help="With --resample-seeds: N samples of K seeds drawn with replacement.",
    ),
    regraded: Optional[list[str]] = typer.Option(
        None,
        "--regraded",
        help="Verdict only: recompute it on this regraded run (`replaykit regrade`), repeatable.",
    ),
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    wide: bool = WideOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Audit offline: recompute a verdict, or replay a training counterfactually (another criterion/optimizer)."""
    wide_layout(wide)
    writes = record or bool(noise and resample_seeds)  # the only audits that record
    st = open_store(store, readonly=not writes, config=config)  # reading never writes
    kind = st.doc_kind(target)
    if kind == "verdict":
        training_only = {
            "--optimizer": optimizer,
            "--record": record,
            "--sweep": sweep,
            "--noise": noise,
            "--workspace": workspace,
        }
        for flag, given in training_only.items():
            if given:
                raise ConfigError(
                    f"{flag} needs a training id; {target} is a verdict (see `replaykit runs --kind training`)"
                )
        _verdict(st, target, criterion, resample_seeds, bootstrap, regraded, as_json)
        return
    _check_training(target, kind, regraded, epoch, workspace)
    if workspace:
        _workspace(st, target, epoch, as_json)
        return
    if noise:
        _training_noise(
            st,
            target,
            resample_seeds,
            as_json,
            criterion=criterion,
            optimizer=optimizer,
            record=record,
            sweep=sweep,
            bootstrap=bootstrap,
        )
        return
    if resample_seeds is not None or bootstrap is not None:
        raise ConfigError(
            "--resample-seeds on a training goes with --noise (extra seeds for its noise floor); "
            "on a verdict it resamples the recorded seeds (its verdicts: `replaykit runs --kind verdict`)"
        )
    if sweep:
        if record or criterion or optimizer:
            raise ConfigError(
                "--sweep lists the criteria and optimizers itself; drop --criterion/--optimizer/--record"
            )
        _sweep(st, target, sweep, as_json)
        return
    _counterfactual(st, target, criterion, optimizer, record, as_json)


def _check_training(
    target: str, kind: str, regraded: list[str] | None, epoch: int | None, workspace: bool
) -> None:
    """A training's audit: one line for a flag it does not take."""
    if kind != "training":
        raise ConfigError(f"{target} is a {kind}; audit takes a verdict id or a training id")
    if regraded:
        raise ConfigError(f"--regraded needs a verdict id; {target} is a {kind}")
    if epoch is not None and not workspace:
        raise ConfigError("--epoch goes with --workspace (what the proposer of that epoch saw)")


def _workspace(st: Any, target: str, epoch: int | None, as_json: bool) -> None:
    """``audit TRAINING --workspace [--epoch N]``: each epoch's workspace as its proposal recorded it."""
    from replaykit.train.workspace import workspace_audit

    report = workspace_audit(st, target, epoch)
    if as_json:
        emit_json(report)
        return
    for e in report:
        if not e["workspace_digest"]:
            render.line(f"epoch {e['epoch']}: no workspace (its proposal read the brief only)")
            continue
        cassette = (e["proposal_cassette"] or "-")[:12]
        render.line(
            f"epoch {e['epoch']}: workspace {e['workspace_digest'][:16]} · {len(e['files'])} file(s) · "
            f"proposal {cassette}"
        )
        render.show_table(
            "", ["path", "bytes", "sha256"], [[str(p), str(n), str(h)] for p, n, h in e["files"]]
        )


def _verdict(
    st: Any,
    target: str,
    criterion: str | None,
    resample_seeds: int | None,
    bootstrap: int | None,
    regraded: list[str] | None,
    as_json: bool,
) -> None:
    """``audit VERDICT``: recomputed (on regraded runs), or judged on subsets of its seeds."""
    if resample_seeds is not None:
        from replaykit.train.robustness import resample_seeds as resample

        robust = resample(st, target, resample_seeds, bootstrap, criterion)
        emit_json(robust) if as_json else robustness_table(robust)
        return
    if bootstrap is not None:
        raise ConfigError("--bootstrap goes with --resample-seeds K")
    from replaykit.train.audit import audit as audit_verdict

    report = audit_verdict(st, target, criterion, regraded)
    emit_json(report) if as_json else render.audit_report(report)
    if not report["reproduced"]:
        raise typer.Exit(1)


def _sweep(st: Any, target: str, sweep: list[str], as_json: bool) -> None:
    """``audit TRAINING --sweep``: the training replayed under every criterion and optimizer listed."""
    from replaykit.train.sweep import parse_sweep
    from replaykit.train.sweep import sweep as run_sweep

    axes = parse_sweep(sweep)
    with render.progress(enabled=not as_json) as progress:
        srep = run_sweep(st, target, axes["criteria"], axes["optimizers"], progress)
    emit_json(srep) if as_json else sweep_table(srep)


def _counterfactual(
    st: Any, target: str, criterion: str | None, optimizer: str | None, record: bool, as_json: bool
) -> None:
    """``audit TRAINING [--criterion] [--optimizer] [--record]``: the training replayed under
    another policy (``--record``: continued live where its runs are missing)."""
    recorded: RecordedAudit | None = None
    with render.progress(enabled=not as_json) as progress:
        if record:
            from replaykit.train.counterfactual_record import record_counterfactual, recorded_audit

            recorded = recorded_audit(record_counterfactual(st, target, criterion, optimizer, progress))
            rep: CounterfactualReport = recorded
        else:
            from replaykit.train.counterfactual import counterfactual

            rep = counterfactual(st, target, criterion, optimizer, progress)
    if as_json:
        emit_json(rep)
        return
    counterfactual_table(rep)
    if recorded is not None:
        render.line(
            f"recorded as training {recorded['recorded_training']} on branch {recorded['recorded_branch']} "
            f"(replay it: replaykit replay {recorded['recorded_training']})"
        )


def _training_noise(st: Any, target: str, resample_seeds: int | None, as_json: bool, **others: Any) -> None:
    """``audit TRAINING --noise [--resample-seeds N]`` (``train.noise_audit``)."""
    for flag, given in others.items():
        if given:
            raise ConfigError(
                f"--noise audits the training as recorded; drop --{flag.replace('_', '-')} "
                "(a counterfactual is its own audit)"
            )
    from replaykit.train.noise_audit import noise_audit

    with render.progress(enabled=not as_json) as progress:
        report = noise_audit(st, target, resample_seeds, live=resample_seeds is not None, progress=progress)
    emit_json(report) if as_json else render.noise_table(report)
