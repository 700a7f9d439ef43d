"""What each viewer page shows, gathered from the store through its named queries (reads only).

Every function takes a :class:`~replaykit.cassette.backend.StoreBackend` and returns a
JSON-ready dict the templates render; lists are read one page at a time (index columns
only), documents and episodes only for what is on the page. Verdicts are read through
``train.derived`` (recomputed, as every command reads them): a forged one is listed, and its
page shown, as ``store corrupt: …``. The trainings' pages are ``trainings.py``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from replaykit.cassette.backend import BrowseStore, DocumentStore, ListingStore, RunStore
from replaykit.cassette.facets import FACETS as CALL_FACETS
from replaykit.core.compare_doc import CompareCell
from replaykit.core.errors import StoreCorrupt, StoreError
from replaykit.episodes.compare import read_compare, verified_compare
from replaykit.episodes.views import lineage
from replaykit.report.diff import diff_verdict
from replaykit.report.documents import CompareRow
from replaykit.report.sides import transcripts_side_by_side
from replaykit.report.transcript import CUT_NOTE, episode_summary, transcript
from replaykit.train.derived import verified_verdict
from replaykit.train.evidence import replicates_text, verdict_evidence
from replaykit.train.stats import stored_run_stats
from replaykit.view.caps import CAP, capped
from replaykit.view.pages import (
    CompareListRow,
    ComparePage,
    ComparesPage,
    EpisodePage,
    EpisodesPage,
    RawEvent,
    RunGridRow,
    RunPage,
    RunRow,
    RunsPage,
    UnitDiffPage,
    VerdictPage,
    VerdictRow,
    VerdictsPage,
)

if TYPE_CHECKING:
    from replaykit.cassette.store.browsing import EpisodeFacets, EpisodeFilters
    from replaykit.cassette.store.schema import RunsRow

PAGE = 50


def run_row(store: RunStore, row: RunsRow) -> RunRow:
    """A run as listed; one that names a cassette the store lacks, or whose document cannot be
    read, is listed as damaged (``corrupt``: what is wrong), the others as they are."""
    try:
        run = store.get_run(row["id"])
        absent = [c for c in run.cassettes if not store.has(c)]
        if absent:
            raise store.corrupt(f"run {row['id']} names cassette {absent[0]}, which is not in the store")
    except StoreError as exc:
        return {**_blank_run(row), "corrupt": str(exc).split(" in store ")[0].removeprefix("store corrupt: ")}
    episodes = run.episodes
    return {
        **_blank_run(row),
        "solved": run.solved,
        "total": run.total,
        "episodes": len(episodes),
        "steps": sum(e.steps for e in episodes),
        "tokens": sum(e.tokens for e in episodes),
        "infra": sum(e.infra_failure for e in episodes),
        "model_calls": run.model_calls,
        "reused_events": run.reused_events,
        "reuse_basis": run.reuse_basis,
    }


def _blank_run(row: RunsRow) -> RunRow:
    """A run's row as the listing knows it before its document is read (no counts)."""
    return {
        "id": row["id"],
        "name": row.get("name", ""),
        "model": row.get("model", ""),
        "harness_sha": row.get("harness_sha", ""),
        "created_at": row["created_at"],
        "solved": None,
        "total": None,
        "episodes": 0,
        "steps": 0,
        "tokens": 0,
        "infra": 0,
        "model_calls": 0,
        "reused_events": 0,
        "reuse_basis": "",
        "corrupt": "",
    }


def runs(store: BrowseStore, model: str = "", harness: str = "", page: int = 1) -> RunsPage:
    rows = [
        r
        for r in store.doc_rows("measure")
        if (not model or r["model"] == model) and (not harness or r["harness_sha"].startswith(harness))
    ]
    page = max(page, 1)
    shown = rows[(page - 1) * PAGE : page * PAGE]
    return {
        "runs": [run_row(store, r) for r in shown],
        "total": len(rows),
        "page": page,
        "pages": max((len(rows) + PAGE - 1) // PAGE, 1),
        "models": sorted({r["model"] for r in store.doc_rows("measure")}),
    }


def runs_holding(store: BrowseStore, harness_of: dict[str, str]) -> dict[str, list[str]]:
    """For each cassette (id → its harness SHA), the runs that list it, newest first; only the
    runs of those harness commits are read."""
    wanted = set(harness_of.values())
    out: dict[str, list[str]] = {}
    for row in store.doc_rows("measure"):
        if row["harness_sha"] in wanted:
            for e in store.get_run(row["id"]).episodes:
                if e.cassette_id in harness_of:
                    out.setdefault(e.cassette_id, []).append(row["id"])
    return out


def run(store: BrowseStore, run_id: str) -> RunPage:
    doc = store.get_run(run_id)
    episodes = doc.episodes
    tasks = list(dict.fromkeys(doc.panel.tasks or [e.task_id for e in episodes]))
    tasks = [t.rstrip("/").rsplit("/", 1)[-1] for t in tasks]
    seeds = list(dict.fromkeys(doc.panel.seeds or [e.seed for e in episodes]))
    cells = {(e.task_id, e.seed): e for e in episodes}
    for e in episodes:
        if e.task_id not in tasks:
            tasks.append(e.task_id)
    grid: list[RunGridRow] = [
        {"task_id": t, "cells": [cells.get((t, s)) for s in seeds]}
        for t in tasks
        if any((t, s) in cells for s in seeds)
    ]
    row: RunsRow = {
        "id": doc.run_id,
        "kind": doc.kind,
        "name": "",
        "model": doc.model.name,
        "endpoint": doc.model.endpoint,
        "harness_sha": doc.harness_sha,
        "config_digest": doc.config_digest,
        "doc": "",
        "created_at": "",
    }
    trainings = [
        t["id"] for t in store.doc_rows("training") if doc.run_id in store.get_training(t["id"]).runs
    ]
    return {
        "run": {**run_row(store, row), "endpoint": doc.model.endpoint},
        "seeds": seeds,
        "grid": grid,
        "trainings": trainings,
        "replicates": replicates_text(stored_run_stats(store, doc)),  # derived: its seeds, its certificates
    }


def verdict_row(store: RunStore, row: RunsRow) -> VerdictRow:
    """A verdict as listed, recomputed first; a forged one is listed as store corrupt."""
    try:
        doc = verified_verdict(store, row["id"])
    except StoreCorrupt as exc:
        return {**_blank_verdict(row), "corrupt": str(exc)}
    v = doc.verdict
    return {
        "id": row["id"],
        "training_id": doc.training_id,
        "epoch": doc.epoch,
        "accept": v.get("accept"),
        "criterion": v.get("criterion", ""),
        "loss": v.get("loss"),
        "reason": v.get("reason", ""),
        "new_solves": v.get("new_solves") or [],
        "regressions": v.get("regressions") or [],
        "baseline_sha": doc.baseline_sha,
        "candidate_sha": doc.candidate_sha,
        "baseline_run": doc.baseline_run,
        "candidate_run": doc.candidate_run,
        "created_at": row["created_at"],
        "corrupt": "",
    }


def _blank_verdict(row: RunsRow) -> VerdictRow:
    return {
        "id": row["id"],
        "training_id": "",
        "epoch": None,
        "accept": None,
        "criterion": "",
        "loss": None,
        "reason": "",
        "new_solves": [],
        "regressions": [],
        "baseline_sha": "",
        "candidate_sha": None,
        "baseline_run": "",
        "candidate_run": None,
        "created_at": row["created_at"],
        "corrupt": "",
    }


def verdicts(store: BrowseStore, movement: str = "") -> VerdictsPage:
    rows = [verdict_row(store, r) for r in store.doc_rows("verdict")]
    if movement == "regression":
        rows = [r for r in rows if r["regressions"]]
    elif movement == "new-solve":
        rows = [r for r in rows if r["new_solves"]]
    return {"verdicts": rows, "movement": movement}


def verdict(store: BrowseStore, verdict_id: str) -> VerdictPage:
    full = store.resolve_id("runs", verdict_id, what="verdict")
    verified_verdict(store, full)  # a forged verdict's page is its one line
    row = next(r for r in store.doc_rows("verdict") if r["id"] == full)
    return {"verdict": verdict_row(store, row), "evidence": verdict_evidence(store, full)}


def unit_diff(store: RunStore, verdict_id: str, unit: str, full: bool = False) -> UnitDiffPage:
    """The two episodes of one unit of a verdict: their first difference, and both transcripts
    side by side, aligned there, every pair of turns that differs marked (texts cut at
    ``CAP`` unless ``full``)."""
    doc = diff_verdict(store, verdict_id, unit)
    u = doc["units"][0]
    a, b = store.get_episode(u["a"]["id"]), store.get_episode(u["b"]["id"])
    first = u["first_difference"]["position"] if u["first_difference"] else len(a.events)
    sides = transcripts_side_by_side(a, b, first, None if full else CAP)
    lines = [line for t in sides["shared"] for line in t["lines"]] + [
        r[side] or "" for p in sides["pairs"] for r in p["rows"] for side in ("a", "b")
    ]
    return {
        "diff": doc,
        "unit": u,
        "sides": sides,
        "full": full,
        "cut": any(CUT_NOTE in line for line in lines),
        "wall_seconds": [a.meta.get("wall_seconds"), b.meta.get("wall_seconds")],
    }


def compares(store: BrowseStore) -> ComparesPage:
    out: list[CompareListRow] = []
    for row in store.doc_rows("compare"):
        listed: CompareListRow = {
            "id": row["id"],
            "name": row.get("name", ""),
            "models": [],
            "harnesses": [],
            "created_at": row["created_at"],
            "corrupt": "",
        }
        try:  # one it cannot read is listed as damaged; the others stand
            doc = read_compare(store, row["id"])
        except StoreError as exc:
            listed["corrupt"] = str(exc).split(" in store ")[0].removeprefix("store corrupt: ")
        else:
            listed["models"], listed["harnesses"] = doc.models, doc.harnesses
        out.append(listed)
    return {"compares": out}


def compare(store: DocumentStore, compare_id: str) -> ComparePage:
    doc = verified_compare(store, compare_id)  # its cells recomputed from their runs
    models, harnesses = doc.models, doc.harnesses
    rows: list[CompareRow[CompareCell]] = []
    for h in harnesses:
        cells: dict[str, CompareCell] = {c["model"]: c for c in doc.cells if c["harness"] == h}
        sha = next(iter(cells.values()))["harness_sha"] if cells else ""
        rows.append({"harness": h, "harness_sha": sha, "cells": [cells.get(m) for m in models]})
    delta = None
    if len(rows) >= 2:  # the last harness (e.g. the trained one) against the first (the untrained one)
        first, last = rows[0]["cells"], rows[-1]["cells"]
        delta = [
            (b["solve_rate"] - a["solve_rate"]) if a is not None and b is not None else None
            for a, b in zip(first, last, strict=True)
        ]
    return {
        "compare": {
            "id": doc.compare_id,
            "name": doc.name,
            "models": models,
            "rows": rows,
            "delta": delta,
        }
    }


def _with_chosen(facets: EpisodeFacets, filters: EpisodeFilters) -> EpisodeFacets:
    """The facets (the first values of each column) with the value a filter holds among them,
    so the form shows, and sends again, what the page is filtered by."""

    def keep(values: list[Any], chosen: object) -> None:
        if chosen not in (None, "") and chosen not in values:
            values.append(chosen)
            values.sort()

    keep(facets["task_id"], filters.get("task_id"))
    keep(facets["seed"], filters.get("seed"))
    keep(facets["model"], filters.get("model"))
    return facets


def episodes(
    store: ListingStore, filters: EpisodeFilters, sort: str, descending: bool, page: int
) -> EpisodesPage:
    page = max(page, 1)
    rows, total = store.episode_page(
        filters, sort=sort, descending=descending, limit=PAGE, offset=(page - 1) * PAGE
    )
    return {
        "episodes": rows,
        "total": total,
        "page": page,
        "pages": max((total + PAGE - 1) // PAGE, 1),
        "facets": _with_chosen(store.episode_facets(), filters),
        "filters": filters,
        "sort": sort,
        "descending": descending,
        "call_facets": list(CALL_FACETS),
        "unclassified": 0,
    }


def episode(store: RunStore, cassette_id: str, full: bool = False) -> EpisodePage:
    cid = store.resolve_id("cassettes", cassette_id, what="cassette")
    ep = store.get_episode(cid)
    turns = transcript(ep)  # the view adds its cut flags
    for turn in turns:
        if turn["kind"] == "call":
            for m in turn["new"] + turn["reply"]:
                m["content"], m["capped"] = capped(m.get("content") or "", full)
        elif turn["kind"] == "env":
            turn["stdout"], turn["stdout_capped"] = capped(turn["stdout"] or "", full)
            turn["stderr"], turn["stderr_capped"] = capped(turn["stderr"] or "", full)
    raw: list[RawEvent] = []
    for position, event in enumerate(ep.events):
        form = event.digest_form()
        text, cut = capped(json.dumps(form, indent=1, sort_keys=True, default=str), full)
        raw.append({"position": position, "kind": form["kind"], "text": text, "capped": cut})
    row = store.cassette_row(cid)
    summary = episode_summary(cid, ep)
    return {
        "episode": {
            **summary,
            "reward": row.get("reward"),
            "passed": row.get("passed"),
            "infra_failure": row.get("infra_failure"),
            "created_at": row["created_at"],
            "wall_seconds": ep.meta.get("wall_seconds"),
        },
        "grade": ep.grade.to_dict() if ep.grade else None,
        "turns": turns,
        "raw": raw,
        "full": full,
        "meta": {k: v for k, v in ep.meta.items() if isinstance(v, (str, int, float, bool))},
        "lineage": lineage(store, ep),
    }
