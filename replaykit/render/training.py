"""Trainings: the epoch table, a training's replay, a verdict's audit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text

from replaykit.core.glossary import epoch_names, legend
from replaykit.core.training_doc import EpochRecord, TrainingDoc
from replaykit.render.console import line, show_table, wrapped
from replaykit.render.runs import claims_line, divergence
from replaykit.train.adaptive import summary as adaptive_summary
from replaykit.train.audit_records import TrainingReplay, VerdictAudit
from replaykit.train.evidence import evidence_of
from replaykit.train.intervals import signed

if TYPE_CHECKING:
    from replaykit.train.noise_audit import NoiseAudit


def _without_said(skipped: str | None, description: str | None) -> str | None:
    """An empty diff's reason without the proposer's words in parentheses when they are the
    epoch's description already (the line would say them twice)."""
    said = f" ({(description or '').strip()})"
    return skipped[: -len(said)] if skipped and said != " ()" and skipped.endswith(said) else skipped


def training_table(doc: TrainingDoc, epochs: int | None = None, resumed: int = 0) -> None:
    """Short cells in the table; each epoch's proposal and the verdict's reason below it, in full
    (``epochs``: only the first so many, those of this invocation; ``resumed``: how many of them
    were recorded earlier)."""
    shown = doc.epochs[:epochs] if epochs is not None else doc.epochs
    rows: list[list[str | Text]] = []
    notes: list[str] = []
    for e in shown:
        v = e.verdict
        m = v["metrics"] if v else {}
        solved = f"{m.get('solved_baseline')} → {m.get('solved_candidate')}" if v else "-"
        rows.append(
            [
                str(e.epoch),
                (e.candidate_sha or "-")[:10],
                e.decision,
                (e.verdict_id or "-")[:10],
                f"{e.loss or 0.0:+.3f}",
                solved,
            ]
        )
        why = _without_said(e.skipped, e.description) or (v["reason"] if v else "")
        notes.append(f"epoch {e.epoch}: {e.description}" + (f" — {why}" if why else ""))
    show_table(
        f"training {doc.training_id} · {doc.initial_sha[:10]} → {doc.final_baseline[:10]}",
        ["epoch", "candidate", "verdict", "verdict id", "loss", "solved"],
        rows,
    )
    if resumed:
        line(f"resumed {resumed} epoch(s) recorded earlier (recomputed from cassettes, no model calls)")
    wrapped(legend("solved", "loss"))
    for note in notes:
        wrapped(note)  # a proposal's words and the verdict's reason: prose, wrapped into a pipe
    wrapped(decision_counts(shown))
    line(f"baseline branch {doc.branch} at {doc.final_baseline[:10]}")


def decision_counts(epochs: list[EpochRecord]) -> str:
    """``1 accepted (e0), 3 rejected (e1, e2, e4), 1 skipped (e3)``: counts and which epochs."""
    parts = []
    for decision in ("accepted", "rejected", "skipped"):
        which = [e.epoch for e in epochs if e.decision == decision]
        parts.append(f"{len(which)} {decision}" + (f" ({epoch_names(which)})" if which else ""))
    return ", ".join(parts)


def training_replay(report: TrainingReplay) -> None:
    rows: list[list[str | Text]] = [
        [
            str(e["epoch"]),
            (e["candidate_sha"] or "-")[:10],
            (e["replayed_candidate_sha"] or "-")[:10],
            f"{e['decision']} / {e['replayed_decision']}",
            "yes" if e["identical"] else "NO " + ",".join(e["differs_in"]),
        ]
        for e in report["epochs"]
    ]
    show_table(
        f"replay of training {report['training_id']}",
        ["epoch", "candidate (recorded)", "candidate (replayed)", "decision", "identical"],
        rows,
    )
    runs_ok = sum(r["identical"] for r in report["runs"])
    line(
        f"runs replayed identically: {runs_ok}/{len(report['runs'])} · final baseline {report['final_baseline'][:10]} / {report['replayed_final_baseline'][:10]}"
    )
    for r in report["runs"]:
        divergence(r["divergence"])
    claims_line(report.get("claims_checked", 0), report.get("claims_unchecked") or [])
    line("identical" if report["identical"] else "DIVERGED")


def audit_report(report: VerdictAudit) -> None:
    rec = report["recorded"]
    line(
        f"verdict {report['verdict_id']} (epoch {report['epoch']}): {rec['criterion']} → {'accept' if rec['accept'] else 'reject'}, loss {rec['loss']:+.3f}"
    )
    wrapped(f"  {rec['reason']}", "    ")
    wrapped(
        f"  regressions: {', '.join(rec['regressions']) or 'none'} · new solves: {', '.join(rec['new_solves']) or 'none'}",
        "    ",
    )
    line("reproduced offline: " + ("yes" if report["reproduced"] else "NO"))
    evidence = evidence_of(report)  # worded once: the viewer's verdict page and the report say the same
    for text in (evidence["noise"], evidence["paired"], evidence["panel"], evidence["facets"]):
        if text:
            wrapped(text)  # prose: at words into a pipe, so it fits 80 columns
    if points := report.get("adaptive"):
        wrapped(adaptive_summary(points))
        wrapped("  seeds per task: " + ", ".join(f"{t} {n}" for t, n in points["seeds"].items()), "    ")
    for role, text in evidence["replicates"].items():
        line(f"  {role}: {text}")
    if evidence["flips"]:
        line(f"attribution of the movement: {evidence['summary']}")
        for flip in evidence["flips"]:
            ended = f" (ended by {flip['ended_by']})" if flip["ended_by"] else ""
            wrapped(f"  {flip['unit']} {flip['movement']}{ended}: {flip['label']} — {flip['reason']}", "    ")
    regraded = report.get("regraded")
    if regraded:
        wrapped(
            ("decision WOULD DIFFER " if regraded["differs"] else "decision would be the same ")
            + f"— {regraded['summary']} (in place: "
            + ", ".join(f"{role} {run}" for role, run in sorted(regraded["replaced"].items()))
            + ")"
        )
    cf = report.get("counterfactual")
    if cf:
        wrapped(
            ("decision WOULD DIFFER " if cf["differs"] else "decision would be the same ")
            + f"— {cf['summary']}"
        )


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def noise_table(report: NoiseAudit) -> None:
    """``audit TRAINING --noise``: each epoch's margin, noise floor, interval, p-values and attribution."""
    rows: list[list[str | Text]] = []
    for r in report["epochs"]:
        interval = r["interval"]
        shown = f"[{interval['low']:+.3f}, {interval['high']:+.3f}]" if interval else "-"
        within = "-" if r["within_noise"] is None else ("yes" if r["within_noise"] else "no")
        flips = r.get("attribution")
        rows.append(
            [
                str(r["epoch"]),
                r["decision"],
                _num(r["margin"], signed=True),
                _num(r["noise_floor"]),
                within,
                shown,
                _num(r["p_value"]),
                _num(r["p_holm"]),
                f"{flips['attributed']}/{flips['incidental']}" if flips else "-",
            ]
        )
    seeds = report["resampled_seeds"]
    extra = f" · extra seeds {', '.join(map(str, seeds))}" if seeds else ""
    show_table(
        f"noise of training {report['training_id']} ({report['criterion']}, score {report['score']}{extra})",
        ["epoch", "decision", "margin", "floor", "within", "95% interval", "p", "Holm p", "a/i"],
        rows,
        optional=["95% interval"],
    )
    wrapped(legend("margin", "floor", "within", "p", "Holm p", "a/i"))
    for r in report["epochs"]:
        if r["excluded"]:
            line(f"epoch {r['epoch']}: excluded (forked): {', '.join(sorted(r['excluded']))}")
        attribution = r.get("attribution")
        ended = attribution["ended_by"] if attribution else {}
        if ended:
            shown = ", ".join(f"{facet} {n}" for facet, n in ended.items())
            wrapped(
                f"epoch {r['epoch']}: movements whose failing episode ended on a call gone wrong: {shown}"
            )
    wrapped(report["summary"])


def _panel_cell(view: Mapping[str, Any] | None) -> str:
    """``6/8 → 7/8`` (baseline → candidate), ``6/8`` when the candidate was not measured there."""
    if not view or not view.get("baseline"):
        return "-"
    base, cand = view["baseline"], view.get("candidate")
    return f"{base['solved']}/{base['total']}" + (f" → {cand['solved']}/{cand['total']}" if cand else "")


def panels_table(epochs: Sequence[Mapping[str, Any]]) -> None:
    """A training with held-out panels (``train.panels``): per epoch, each panel's solved
    instances (baseline → candidate; test: the candidate only when accepted), then each
    epoch's generalisation gaps with their 95% intervals."""
    names = [p for p in ("train", "val", "test") if any(p in (e.get("panels") or {}) for e in epochs)]
    if len(names) < 2:
        return
    rows: list[list[str | Text]] = [
        [f"e{e['epoch']}", *[_panel_cell((e.get("panels") or {}).get(p)) for p in names]] for e in epochs
    ]
    show_table("solved per panel (baseline → candidate)", ["epoch", *names], rows)
    for e in epochs:
        gaps = e.get("gap") or {}
        parts = [
            f"{label} {signed(found)}"
            for label, key in (("val − train", "val_train"), ("test − val", "test_val"))
            if (found := gaps.get(key))
        ]
        if parts:
            line(f"e{e['epoch']} baseline gap: " + " · ".join(parts))
    wrapped(legend("gap"))
