"""Audit a recorded verdict offline (with its criterion or a counterfactual one),
replay a whole training, and compare harnesses × models."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from replaykit.cassette.store import Store
from replaykit.config import RunConfig
from replaykit.determinism import digest_of
from replaykit.executor import Executor
from replaykit.run import measure, replay_runs
from replaykit.train.criteria import make_criterion


def audit(store: Store, verdict_id: str, criterion: str | None = None) -> dict[str, Any]:
    """Recompute a verdict from its two stored runs; with ``criterion``, say whether the decision would differ."""
    doc = store.get_doc(verdict_id, kind="verdict")
    recorded = doc["verdict"]
    baseline, candidate = store.get_run(doc["baseline_run"]), store.get_run(doc["candidate_run"])
    own = make_criterion(recorded["criterion"], **recorded["params"])(candidate, baseline, recorded.get("excluded"))
    out: dict[str, Any] = {
        "verdict_id": doc["verdict_id"], "training_id": doc.get("training_id"), "epoch": doc.get("epoch"),
        "baseline_sha": doc["baseline_sha"], "candidate_sha": doc["candidate_sha"],
        "recorded": recorded, "recomputed": own.to_dict(),
        "reproduced": own.to_dict() == recorded,
    }
    if criterion:
        other = make_criterion(criterion)(candidate, baseline, recorded.get("excluded"))
        out["counterfactual"] = {
            "criterion": criterion, "verdict": other.to_dict(),
            "differs": other.accept != recorded["accept"],
            "summary": (f"under {criterion}: {'accept' if other.accept else 'reject'} ({other.reason}); "
                        f"recorded {recorded['criterion']}: {'accept' if recorded['accept'] else 'reject'} ({recorded['reason']})"),
        }
    return out


def replay_training(
    store: Store, training_id: str, episodes: bool = True, progress: Any = None, executor: Executor | None = None
) -> dict[str, Any]:
    """Re-run a recorded training offline in a scratch copy of its harness repository."""
    from replaykit.train import gitops
    from replaykit.train.trainer import Trainer

    doc = store.get_doc(training_id, kind="training")
    tmp = Path(tempfile.mkdtemp(prefix="replaykit-train-replay-"))
    try:
        gitops.clone_bundle(store.get_blob(doc["initial_bundle"]), tmp / "harness", doc["initial_sha"], doc["branch"])
        data = dict(doc["config"])
        data["harness"] = dict(data["harness"], repo=str(tmp / "harness"), template=None)
        data["store"] = str(store.root.resolve())
        config = RunConfig.model_validate(data)
        config.base_dir = Path(doc["config_base_dir"])
        trainer = Trainer(config=config, estimator=Trainer.stored_estimator(store, doc), record_mode="none", persist=False,
                          store=store, progress=progress)
        for loss in trainer.epochs(len(doc["epochs"])):
            loss.backward()
            trainer.optimizer.step()
        replayed = trainer.summary()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fields = ("candidate_sha", "decision", "loss", "skipped", "verdict")
    epochs = []
    for rec, rep in zip(doc["epochs"], replayed["epochs"], strict=False):
        diffs = [f for f in fields if rec.get(f) != rep.get(f)]
        epochs.append({"epoch": rec["epoch"], "candidate_sha": rec["candidate_sha"], "replayed_candidate_sha": rep["candidate_sha"],
                       "decision": rec["decision"], "replayed_decision": rep["decision"], "identical": not diffs, "differs_in": diffs})
    runs = []
    if episodes:  # every run's episodes in one batch: a training's replay fans out on the executor
        for run_id, report in zip(doc["runs"], replay_runs(store, list(doc["runs"]), executor=executor), strict=True):
            runs.append({"run_id": run_id, "identical": report["identical"], "divergence": report["divergence"]})
    same_final = replayed["chain"][-1] == doc["chain"][-1] and len(doc["epochs"]) == len(replayed["epochs"])
    return {
        "training_id": doc["training_id"], "identical": same_final and all(e["identical"] for e in epochs) and all(r["identical"] for r in runs),
        "final_baseline": doc["chain"][-1], "replayed_final_baseline": replayed["chain"][-1],
        "epochs": epochs, "runs": runs,
    }


def compare(config: RunConfig, models: list[str], harness_refs: list[str], record_mode: str = "once", progress: Any = None) -> dict[str, Any]:
    """Measure (or reuse) every harness × model cell: the "train once, swap models" table."""
    cells = []
    repo = None
    if progress:
        progress("outer", {"total": len(models) * len(harness_refs), "label": "cell"})
    for ref in harness_refs:
        for name in models:
            model = config.model.model_copy(update={"name": name})
            result = measure(config, record_mode=record_mode, harness_ref=ref, model=model, progress=progress)
            if progress:
                progress("outer_step", {"label": f"{ref} × {name}"})
            run = result.run
            repo = repo or run["harness_repo"]
            cells.append({"harness": ref, "harness_sha": run["harness_sha"], "model": name, "run_id": run["run_id"],
                          "solved": run["solved"], "total": run["total"], "solve_rate": run["solved"] / max(run["total"], 1),
                          "recorded": len(result.recorded), "reused": len(result.reused)})
    return {**store_compare(Store(config.store_path), config.name, models, harness_refs, cells), "cells": cells}


def store_compare(store: Store, name: str, models: list[str], harness_refs: list[str], cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Keep a compare result in the store (kind ``compare``, id from its cells) so `replaykit report` can show it."""
    stable = [{k: v for k, v in c.items() if k not in ("recorded", "reused")} for c in cells]
    doc: dict[str, Any] = {"kind": "compare", "name": name, "models": models, "harnesses": harness_refs, "cells": stable,
           "runs": [c["run_id"] for c in stable], "trees": sorted({c["harness_sha"] for c in stable})}
    compare_id = digest_of([models, harness_refs, [[c["harness_sha"], c["model"], c["run_id"]] for c in stable]])[:16]
    doc["compare_id"] = compare_id
    store.put_doc(compare_id, "compare", doc, name=name, model=",".join(models))
    return doc
