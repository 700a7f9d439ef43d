"""Gather what a report shows, from the store (reads only): a training, a run, a verdict or a compare result.

:func:`build` returns a JSON-ready context (runs, verdicts, movement diffs, candidate
code diffs, transcripts) plus matplotlib figures; ``html.py`` renders it.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING, cast

from replaykit.cassette.backend import BrowseStore, DocumentStore, RunStore
from replaykit.cassette.outcomes import outcome_of
from replaykit.core.compare_doc import CompareDoc
from replaykit.core.errors import ReplaykitError
from replaykit.core.training_doc import TrainingDoc
from replaykit.core.verdict_doc import VerdictDoc
from replaykit.episodes.compare import verified_compare
from replaykit.report import charts
from replaykit.report.diff import diff_episodes
from replaykit.report.documents import (
    CompareRow,
    CompareSection,
    CompareSectionCell,
    DiffSection,
    EpochSection,
    GridRow,
    MovementRow,
    ReportContext,
    RunCell,
    RunPoint,
    RunSection,
    TrainingSection,
    TranscriptSection,
    VerdictSection,
)
from replaykit.report.transcript import OUTPUT_CAP, episode_summary, transcript
from replaykit.report.transfer import transfer_section
from replaykit.train.calibration import false_accept_line
from replaykit.train.derived import verified_training, verified_verdict
from replaykit.train.evidence import verdict_evidence
from replaykit.train.panels import PANELS, epoch_panels
from replaykit.train.stats import rate_interval
from replaykit.train.sweep import report_sweep
from replaykit.train.transfer_doc import verified_transfer

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from replaykit.models.probe import ProbeResult

KINDS = ("training", "measure", "verdict", "compare", "probe", "transfer")


def anchor(*parts: object) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(str(p) for p in parts)).strip("-")


class Report:
    """Accumulates sections; each episode's transcript and each diff is collected once."""

    def __init__(self, store: RunStore, cap: int | None = OUTPUT_CAP) -> None:
        self.store, self.cap = store, cap  # each output in transcripts and diffs is cut to cap bytes
        self.figures: dict[str, Figure] = {}
        self.runs: dict[str, RunSection] = {}
        self.transcripts: dict[str, TranscriptSection] = {}
        self.diffs: dict[str, DiffSection] = {}

    # -- pieces ------------------------------------------------------------------
    def run(self, run_id: str) -> RunSection:
        """A run's task × seed grid (reward, steps, tokens, infra failures), each episode linked to its transcript."""
        if run_id in self.runs:
            return self.runs[run_id]
        doc = self.store.get_run(run_id)
        episodes = doc.episodes
        tasks = list(dict.fromkeys(doc.panel.tasks or [e.task_id for e in episodes]))
        seeds = list(dict.fromkeys(doc.panel.seeds or [e.seed for e in episodes]))
        cells: dict[tuple[str, int | str], RunCell] = {}
        for e in episodes:
            found = self.transcript(e.cassette_id)
            outcome = self.transcripts[e.cassette_id]["outcome"]  # derived from its events
            cells[(e.task_id, e.seed)] = RunCell(episode=e, anchor=found, outcome=outcome)
        grid: list[GridRow] = [{"task_id": t, "cells": [cells.get((t, s)) for s in seeds]} for t in tasks]
        out: RunSection = {
            "run_id": doc.run_id,
            "anchor": anchor("r", doc.run_id),
            "harness_sha": doc.harness_sha,
            "model": doc.model.name,
            "endpoint": doc.model.endpoint,
            "seeds": seeds,
            "grid": grid,
            "solved": doc.solved,
            "total": doc.total,
            "tokens": sum(e.tokens for e in episodes),
            "steps": sum(e.steps for e in episodes),
            "infra": sum(e.infra_failure for e in episodes),
            "per_task": {t: _fraction([cells[(t, s)] for s in seeds if (t, s) in cells]) for t in tasks},
            "model_calls": doc.model_calls,
            "reused_events": doc.reused_events,
            "reuse_basis": doc.reuse_basis,
        }
        self.runs[run_id] = out
        return out

    def transcript(self, cassette_id: str) -> str:
        """Collect a cassette's transcript; return its anchor."""
        if cassette_id not in self.transcripts:
            episode = self.store.get_episode(cassette_id)
            self.transcripts[cassette_id] = {
                "anchor": anchor("t", cassette_id),
                "episode": episode_summary(cassette_id, episode),
                "turns": transcript(episode, self.cap, cassette_id),
                "meta_kind": episode.meta.get("kind", episode.key.kind),
                "outcome": outcome_of(episode),
            }
        return self.transcripts[cassette_id]["anchor"]

    def stored_run(self, run_id: str | None, what: str) -> RunSection:
        """The run a stored document names; one error line when it names none (an unmeasured
        candidate), as when the named run is not in the store."""
        if not run_id:
            raise ReplaykitError(
                f"{what} was not measured (no run is stored); report one of its runs instead"
            )
        return self.run(run_id)

    def verdict(self, doc: VerdictDoc) -> VerdictSection:
        """A verdict row: candidate SHA, decision, reason, per-task movement (each unit linked to its diff)."""
        v = doc.verdict
        what = f"verdict {doc.verdict_id}"
        base = self.stored_run(doc.baseline_run, f"the baseline of {what}")
        cand = self.stored_run(doc.candidate_run, f"the candidate of {what}")
        movement: list[MovementRow] = []
        for label, units in (
            ("new solve", v.get("new_solves") or []),
            ("regression", v.get("regressions") or []),
        ):
            for unit in units:
                movement.append(
                    {
                        "unit": unit,
                        "movement": label,
                        "anchor": self.unit_diff(doc.verdict_id, unit, base, cand),
                    }
                )
        return {
            "verdict_id": doc.verdict_id,
            "anchor": anchor("v", doc.verdict_id),
            "epoch": doc.epoch,
            "baseline_sha": doc.baseline_sha,
            "candidate_sha": doc.candidate_sha,
            "accept": v["accept"],
            "criterion": v["criterion"],
            "loss": v["loss"],
            "reason": v["reason"],
            "movement": movement,
            "baseline_run": base["anchor"],
            "candidate_run": cand["anchor"],
            "code_diff": self.code_diff(doc.baseline_sha, doc.candidate_sha),
            "evidence": verdict_evidence(self.store, doc.verdict_id),  # signal or noise, each flip
        }

    def unit_diff(self, verdict_id: str, unit: str, base: RunSection, cand: RunSection) -> str | None:
        task, _, seed = unit.rpartition("#")
        ids = []
        for run in (base, cand):
            cell = next(
                (
                    c
                    for row in run["grid"]
                    if row["task_id"] == task
                    for c in row["cells"]
                    if c and str(c["episode"].seed) == seed
                ),
                None,
            )
            if cell is None:
                return None
            ids.append(cell["episode"].cassette_id)
        key = anchor("d", verdict_id[:10], task, seed)
        if key not in self.diffs:
            doc = diff_episodes(
                self.store.get_episode(ids[0]), self.store.get_episode(ids[1]), ids[0], ids[1], self.cap
            )
            doc.pop("aligned")
            self.diffs[key] = {
                **doc,
                "anchor": key,
                "unit": unit,
                "verdict_id": verdict_id,
                "a_anchor": self.transcript(ids[0]),
                "b_anchor": self.transcript(ids[1]),
            }
        return key

    def code_diff(self, base_sha: str | None, cand_sha: str | None) -> list[str] | None:
        """The candidate's change as a unified diff of the stored harness trees (None if a tree is not stored)."""
        if (
            not base_sha
            or not cand_sha
            or not (self.store.has_tree(base_sha) and self.store.has_tree(cand_sha))
        ):
            return None
        a, b = self.store.get_tree(base_sha), self.store.get_tree(cand_sha)
        lines: list[str] = []
        for path in sorted(set(a) | set(b)):
            da, db = a.get(path, (0, b""))[1], b.get(path, (0, b""))[1]
            if da != db:
                lines += difflib.unified_diff(
                    da.decode("utf-8", "replace").splitlines(),
                    db.decode("utf-8", "replace").splitlines(),
                    f"a/{path}",
                    f"b/{path}",
                    lineterm="",
                )
        return lines

    # -- documents -----------------------------------------------------------------
    def training(self, doc: TrainingDoc) -> TrainingSection:
        epochs: list[EpochSection] = []
        verdicts: list[VerdictSection] = []
        for e in doc.epochs:
            base = self.stored_run(
                e.baseline_run, f"the baseline of epoch {e.epoch} of training {doc.training_id}"
            )
            cand = self.run(cand_id) if (cand_id := e.candidate_run) else None
            proposal = (
                self.transcript(cassette)
                if (cassette := e.proposal_cassette) and self.store.has(cassette)
                else None
            )
            verdict = self.verdict(stored_verdict(self.store, vid)) if (vid := e.verdict_id) else None
            if verdict:
                verdicts.append(verdict)
            views, gaps = epoch_panels(self.store, e)  # train/val/test rates from the runs
            for view in views.values():  # each panel's runs in the report (their grids, transcripts)
                for run_id in (view["baseline_run"], view["candidate_run"]):
                    if run_id:
                        self.run(run_id)
            epoch: EpochSection = {
                "epoch": e.epoch,
                "decision": e.decision,
                "description": e.description,
                "skipped": e.skipped,
                "baseline_sha": e.baseline_sha,
                "candidate_sha": e.candidate_sha,
                "loss": e.loss if e.loss is not None else 0.0,
                "baseline": _run_point(base),
                "candidate": _run_point(cand) if cand else None,
                "proposal": proposal,
                "verdict": verdict,
                "code_diff": verdict["code_diff"]
                if verdict
                else self.code_diff(e.baseline_sha, e.candidate_sha),
                "anchor": anchor("e", e.epoch),
                "panels": views,
                "gap": gaps,
            }
            epochs.append(epoch)
        self.figures["curve"] = charts.training_curve(epochs)
        panels = [p for p in PANELS if any(p in e["panels"] for e in epochs)]
        if len(panels) > 1:
            self.figures["panels"] = charts.panel_curve(epochs, panels)
        tasks = list(dict.fromkeys(t for e in epochs for t in e["baseline"]["per_task"]))
        columns = ["initial"] + [f"e{e['epoch']}" for e in epochs]
        values = [
            [epochs[0]["baseline"]["per_task"].get(t) if epochs else None]
            + [e["candidate"]["per_task"].get(t) if e["candidate"] else None for e in epochs]
            for t in tasks
        ]
        self.figures["heatmap"] = charts.heatmap(
            tasks, columns, values, "candidate solve rate per task and epoch", "heatmap"
        )
        return {
            "training_id": doc.training_id,
            "name": doc.name,
            "initial_sha": doc.initial_sha,
            "final_baseline": doc.final_baseline,
            "branch": doc.branch,
            "epochs": epochs,
            "verdicts": verdicts,
            "criterion": doc.criterion,
            "false_accept": false_accept_line(doc.criterion),  # measured, on its benchmark's panel
            "model": doc.model,
            "accepted": sum(e["decision"] == "accepted" for e in epochs),
            "rejected": sum(e["decision"] == "rejected" for e in epochs),
            "skipped": sum(e["decision"] == "skipped" for e in epochs),
            "sweep": report_sweep(self.store, doc.training_id),  # other criteria × optimizers, offline
            "panels": panels if len(panels) > 1 else [],
        }

    def compare(self, doc: CompareDoc) -> CompareSection:
        rows: list[CompareRow[CompareSectionCell]] = []
        for h in doc.harnesses:
            cells = {c["model"]: c for c in doc.cells if c["harness"] == h}
            sha = next(iter(cells.values()))["harness_sha"] if cells else ""
            rows.append(
                {
                    "harness": h,
                    "harness_sha": sha,
                    "cells": [
                        {
                            **cells[m],
                            "run": self.run(cells[m]["run_id"])["anchor"],
                            "interval": list(rate_interval(self.store.get_run(cells[m]["run_id"]))),
                        }
                        if m in cells
                        else None
                        for m in doc.models
                    ],
                }
            )
        series = {
            _series_name(r["harness"], r["harness_sha"]): [c["solve_rate"] if c else 0.0 for c in r["cells"]]
            for r in rows
        }
        intervals: dict[str, list[tuple[float, float] | None]] = {
            name: [(c["interval"][0], c["interval"][1]) if c else None for c in r["cells"]]
            for name, r in zip(series, rows, strict=True)
        }
        self.figures["compare"] = charts.grouped_bars(
            doc.models, series, "solve rate: harness × model", "solve rate", "compare-bars", intervals
        )
        return {"compare_id": doc.compare_id, "models": doc.models, "rows": rows}


def _series_name(harness: str, sha: str) -> str:
    """A compare row as the chart's legend names it: the short SHA, after its role or ref if any."""
    return sha[:7] if not harness or sha.startswith(harness) else f"{harness} ({sha[:7]})"


# -- stored documents by kind: the store checks each against its row and kind on read (and
#    ``get_doc`` names what it returns for that kind); reports recompute the derived ones


def stored_training(store: RunStore, training_id: str) -> TrainingDoc:
    return verified_training(store, training_id)  # derived: recomputed before a report shows it


def stored_verdict(store: RunStore, verdict_id: str) -> VerdictDoc:
    return verified_verdict(store, verdict_id)


def stored_compare(store: DocumentStore, compare_id: str) -> CompareDoc:
    return verified_compare(store, compare_id)  # derived from its runs: recomputed before it is drawn


def stored_probe(store: DocumentStore, probe_id: str) -> ProbeResult:
    return cast("ProbeResult", store.get_doc(probe_id, kind="probe"))


def probes(store: BrowseStore, models: set[str] | None = None) -> list[ProbeResult]:
    """Stored determinism probes (``replaykit probe --save``), of these models or all."""
    rows = [r for r in store.list_runs() if r["kind"] == "probe" and (models is None or r["model"] in models)]
    return [stored_probe(store, r["id"]) for r in rows]


def _fraction(episodes: list[RunCell]) -> float | None:
    return sum(e["episode"].passed for e in episodes) / len(episodes) if episodes else None


def _run_point(run: RunSection) -> RunPoint:
    return {
        "run_id": run["run_id"],
        "anchor": run["anchor"],
        "solved": run["solved"],
        "total": run["total"],
        "tokens": run["tokens"],
        "steps": run["steps"],
        "infra": run["infra"],
        "per_task": run["per_task"],
        "model_calls": run["model_calls"],
        "reused_events": run["reused_events"],
        "reuse_basis": run["reuse_basis"],
    }


def build(
    store: BrowseStore, report_id: str, cap: int | None = OUTPUT_CAP
) -> tuple[ReportContext, dict[str, Figure]]:
    """The report context for ``report_id`` (training, run, verdict, compare or transfer) and its
    figures by name."""
    kind = store.doc_kind(report_id)
    if kind not in KINDS:
        raise ReplaykitError(
            f"{report_id!r} is a {kind}; a report is made of a training, a run, a verdict, a compare or a transfer result"
        )
    report = Report(store, cap)
    training = verdict = compare = run = transferred = None
    shown: list[ProbeResult] | None = None
    if kind == "training":
        doc = stored_training(store, report_id)
        training = report.training(doc)
        doc_id, title = doc.training_id, f"training {doc.training_id} ({doc.name})"
    elif kind == "measure":
        run = report.run(store.get_run(report_id).run_id)
        doc_id, title = run["run_id"], f"run {run['run_id']}"
    elif kind == "verdict":
        vdoc = stored_verdict(store, report_id)
        verdict = report.verdict(vdoc)
        doc_id, title = vdoc.verdict_id, f"verdict {vdoc.verdict_id}"
    elif kind == "probe":
        probe = stored_probe(store, report_id)
        shown = [probe]
        doc_id, title = probe["probe_id"], f"probe {probe['probe_id']} ({probe['model']})"
    elif kind == "transfer":
        tdoc = verified_transfer(store, report_id)  # every cell checked against its run
        transferred, report.figures["transfer"] = transfer_section(
            store, tdoc, lambda r: report.run(r)["anchor"]
        )
        doc_id, title = (
            tdoc.transfer_id,
            f"transfer {tdoc.transfer_id} (training {tdoc.training_id})",
        )
    else:
        cdoc = stored_compare(store, report_id)
        compare = report.compare(cdoc)
        doc_id = cdoc.compare_id
        title = f"compare {doc_id}"
    if shown is None:
        shown = probes(store, {r["model"] for r in report.runs.values()})
    return {
        "kind": kind,
        "training": training,
        "verdict": verdict,
        "compare": compare,
        "transfer": transferred,
        "run": run,
        "probes": shown,
        "id": doc_id,
        "title": title,
        "runs": list(report.runs.values()),
        "diffs": list(report.diffs.values()),
        "transcripts": list(report.transcripts.values()),
    }, report.figures
