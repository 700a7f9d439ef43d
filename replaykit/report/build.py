"""Gather what a report shows, from the store (reads only): a training, a run, a verdict or a compare result.

:func:`build` returns a JSON-ready context (runs, verdicts, movement diffs, candidate
code diffs, transcripts) plus matplotlib figures; ``html.py`` renders it.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from replaykit.core.errors import ReplaykitError
from replaykit.report import charts
from replaykit.report.diff import diff_episodes
from replaykit.report.transcript import OUTPUT_CAP, episode_summary, transcript
from replaykit.train.sweep import report_sweep
from replaykit.train.derived import verify_training, verify_verdict

KINDS = ("training", "measure", "verdict", "compare", "probe")


def anchor(*parts: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(str(p) for p in parts)).strip("-")


class Report:
    """Accumulates sections; each episode's transcript and each diff is collected once."""

    def __init__(self, store: Any, cap: int | None = OUTPUT_CAP) -> None:
        self.store, self.cap = store, cap  # each output in transcripts and diffs is cut to cap bytes
        self.figures: dict[str, Any] = {}
        self.runs: dict[str, dict[str, Any]] = {}
        self.transcripts: dict[str, dict[str, Any]] = {}
        self.diffs: dict[str, dict[str, Any]] = {}

    # -- pieces ------------------------------------------------------------------
    def run(self, run_id: str) -> dict[str, Any]:
        """A run's task × seed grid (reward, steps, tokens, infra failures), each episode linked to its transcript."""
        if run_id in self.runs:
            return self.runs[run_id]
        doc = self.store.get_run(run_id)
        episodes = [e.to_dict() for e in doc.episodes]
        tasks = list(dict.fromkeys(doc.panel.get("tasks") or [e["task_id"] for e in episodes]))
        seeds = list(dict.fromkeys(doc.panel.get("seeds") or [e["seed"] for e in episodes]))
        cells = {
            (e["task_id"], e["seed"]): dict(e, anchor=self.transcript(e["cassette_id"])) for e in episodes
        }
        grid = [{"task_id": t, "cells": [cells.get((t, s)) for s in seeds]} for t in tasks]
        out = {
            "run_id": doc.run_id,
            "anchor": anchor("r", doc.run_id),
            "harness_sha": doc.harness_sha,
            "model": doc.model["name"],
            "endpoint": doc.model.get("endpoint", ""),
            "seeds": seeds,
            "grid": grid,
            "solved": doc.solved,
            "total": doc.total,
            "tokens": sum(e.get("tokens") or 0 for e in episodes),
            "steps": sum(e.get("steps") or 0 for e in episodes),
            "infra": sum(bool(e.get("infra_failure")) for e in episodes),
            "per_task": {t: _fraction([cells[(t, s)] for s in seeds if (t, s) in cells]) for t in tasks},
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
            }
        return str(self.transcripts[cassette_id]["anchor"])

    def verdict(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A verdict row: candidate SHA, decision, reason, per-task movement (each unit linked to its diff)."""
        v = doc["verdict"]
        base, cand = self.run(doc["baseline_run"]), self.run(doc["candidate_run"])
        movement = []
        for label, units in (
            ("new solve", v.get("new_solves") or []),
            ("regression", v.get("regressions") or []),
        ):
            for unit in units:
                movement.append(
                    {
                        "unit": unit,
                        "movement": label,
                        "anchor": self.unit_diff(doc["verdict_id"], unit, base, cand),
                    }
                )
        return {
            "verdict_id": doc["verdict_id"],
            "anchor": anchor("v", doc["verdict_id"]),
            "epoch": doc.get("epoch"),
            "baseline_sha": doc["baseline_sha"],
            "candidate_sha": doc["candidate_sha"],
            "accept": v["accept"],
            "criterion": v["criterion"],
            "loss": v["loss"],
            "reason": v["reason"],
            "movement": movement,
            "baseline_run": base["anchor"],
            "candidate_run": cand["anchor"],
            "code_diff": self.code_diff(doc["baseline_sha"], doc["candidate_sha"]),
        }

    def unit_diff(self, verdict_id: str, unit: str, base: dict[str, Any], cand: dict[str, Any]) -> str | None:
        task, _, seed = unit.rpartition("#")
        ids = []
        for run in (base, cand):
            cell = next(
                (
                    c
                    for row in run["grid"]
                    if row["task_id"] == task
                    for c in row["cells"]
                    if c and str(c["seed"]) == seed
                ),
                None,
            )
            if cell is None:
                return None
            ids.append(cell["cassette_id"])
        key = anchor("d", verdict_id[:10], task, seed)
        if key not in self.diffs:
            doc = diff_episodes(
                self.store.get_episode(ids[0]), self.store.get_episode(ids[1]), ids[0], ids[1], self.cap
            )
            doc.pop("aligned")
            self.diffs[key] = dict(
                doc,
                anchor=key,
                unit=unit,
                verdict_id=verdict_id,
                a_anchor=self.transcript(ids[0]),
                b_anchor=self.transcript(ids[1]),
            )
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
    def training(self, doc: dict[str, Any]) -> dict[str, Any]:
        epochs, verdicts = [], []
        for e in doc["epochs"]:
            base = self.run(e["baseline_run"])
            cand = self.run(e["candidate_run"]) if e.get("candidate_run") else None
            row = {
                "epoch": e["epoch"],
                "decision": e["decision"],
                "description": e["description"],
                "skipped": e.get("skipped"),
                "baseline_sha": e["baseline_sha"],
                "candidate_sha": e.get("candidate_sha"),
                "loss": e.get("loss", 0.0),
                "baseline": _run_point(base),
                "candidate": _run_point(cand) if cand else None,
                "proposal": self.transcript(e["proposal_cassette"])
                if e.get("proposal_cassette") and self.store.has(e["proposal_cassette"])
                else None,
                "verdict": None,
                "code_diff": None,
                "anchor": anchor("e", e["epoch"]),
            }
            if e.get("verdict_id"):
                row["verdict"] = self.verdict(self.store.get_doc(e["verdict_id"], kind="verdict"))
                verdicts.append(row["verdict"])
            row["code_diff"] = (
                row["verdict"]["code_diff"]
                if row["verdict"]
                else self.code_diff(e["baseline_sha"], e.get("candidate_sha"))
            )
            epochs.append(row)
        self.figures["curve"] = charts.training_curve(epochs)
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
            "training_id": doc["training_id"],
            "name": doc.get("name", ""),
            "initial_sha": doc["initial_sha"],
            "final_baseline": doc["final_baseline"],
            "branch": doc["branch"],
            "epochs": epochs,
            "verdicts": verdicts,
            "criterion": doc.get("criterion", {}),
            "model": doc.get("model", {}),
            "accepted": sum(e["decision"] == "accepted" for e in epochs),
            "rejected": sum(e["decision"] == "rejected" for e in epochs),
            "skipped": sum(e["decision"] == "skipped" for e in epochs),
            "sweep": report_sweep(self.store, doc["training_id"]),  # other criteria × optimizers, offline
        }

    def compare(self, doc: dict[str, Any]) -> dict[str, Any]:
        rows = []
        for h in doc["harnesses"]:
            cells = {c["model"]: c for c in doc["cells"] if c["harness"] == h}
            sha = next(iter(cells.values()))["harness_sha"] if cells else ""
            rows.append(
                {
                    "harness": h,
                    "harness_sha": sha,
                    "cells": [
                        dict(cells[m], run=self.run(cells[m]["run_id"])["anchor"]) if m in cells else None
                        for m in doc["models"]
                    ],
                }
            )
        series = {
            f"{r['harness']} ({r['harness_sha'][:7]})": [c["solve_rate"] if c else 0.0 for c in r["cells"]]
            for r in rows
        }
        self.figures["compare"] = charts.grouped_bars(
            doc["models"], series, "solve rate: harness × model", "solve rate", "compare-bars"
        )
        return {"compare_id": doc.get("compare_id", ""), "models": doc["models"], "rows": rows}


def probes(store: Any, models: set[str] | None = None) -> list[dict[str, Any]]:
    """Stored determinism probes (``replaykit probe --save``), of these models or all."""
    rows = [r for r in store.list_runs() if r["kind"] == "probe" and (models is None or r["model"] in models)]
    return [store.get_doc(r["id"], kind="probe") for r in rows]


def _fraction(episodes: list[dict[str, Any]]) -> float | None:
    return sum(bool(e["passed"]) for e in episodes) / len(episodes) if episodes else None


def _run_point(run: dict[str, Any]) -> dict[str, Any]:
    return {
        k: run[k] for k in ("run_id", "anchor", "solved", "total", "tokens", "steps", "infra", "per_task")
    }


def build(store: Any, report_id: str, cap: int | None = OUTPUT_CAP) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report context for ``report_id`` (training, run, verdict or compare) and its figures by name."""
    kind = store.doc_kind(report_id)
    if kind not in KINDS:
        raise ReplaykitError(
            f"{report_id!r} is a {kind}; a report is made of a training, a run, a verdict or a compare result"
        )
    report = Report(store, cap)
    ctx: dict[str, Any] = {
        "kind": kind,
        "training": None,
        "verdict": None,
        "compare": None,
        "run": None,
        "probes": [],
    }
    if kind == "training":
        doc = store.get_doc(report_id, kind="training")
        verify_training(store, doc)  # derived: recomputed before the report shows it
        ctx["training"] = report.training(doc)
        ctx["id"], ctx["title"] = doc["training_id"], f"training {doc['training_id']} ({doc.get('name', '')})"
    elif kind == "measure":
        run = report.run(store.get_run(report_id).run_id)
        ctx["run"] = run
        ctx["id"], ctx["title"] = run["run_id"], f"run {run['run_id']}"
    elif kind == "verdict":
        doc = store.get_doc(report_id, kind="verdict")
        verify_verdict(store, doc)
        ctx["verdict"] = report.verdict(doc)
        ctx["id"], ctx["title"] = doc["verdict_id"], f"verdict {doc['verdict_id']}"
    elif kind == "probe":
        doc = store.get_doc(report_id, kind="probe")
        ctx["probes"] = [doc]
        ctx["id"], ctx["title"] = doc["probe_id"], f"probe {doc['probe_id']} ({doc['model']})"
    else:
        doc = store.get_doc(report_id, kind="compare")
        ctx["compare"] = report.compare(doc)
        ctx["id"], ctx["title"] = (
            doc.get("compare_id", report_id),
            f"compare {doc.get('compare_id', report_id)}",
        )
    if kind != "probe":
        ctx["probes"] = probes(store, {r["model"] for r in report.runs.values()})
    ctx["runs"] = list(report.runs.values())
    ctx["diffs"] = list(report.diffs.values())
    ctx["transcripts"] = list(report.transcripts.values())
    return ctx, report.figures
