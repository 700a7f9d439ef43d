"""Audit a recorded verdict offline (with its criterion or a counterfactual one) and
replay a whole training. (``compare`` lives beside ``measure``: ``replaykit.episodes.compare``.)"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from replaykit.cassette.backend import EpisodeStore, RunStore, StoreBackend
from replaykit.cassette.facets import moved, run_facets
from replaykit.cassette.lineage import ClaimStatus
from replaykit.core.errors import ConfigError
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress
from replaykit.core.run_doc import RunDoc
from replaykit.core.verdict_doc import VerdictRecord
from replaykit.episodes.config import RunConfig
from replaykit.episodes.replay import replay_runs
from replaykit.execution.settings import Executor
from replaykit.train.adaptive import stopping_points
from replaykit.train.attribution import attribute
from replaykit.train.audit_records import (
    DocumentReplay,
    EpochReplay,
    FacetsMoved,
    RegradedVerdict,
    RunReplay,
    TrainingClaims,
    TrainingReplay,
    VerdictAudit,
)
from replaykit.train.criteria import make_criterion
from replaykit.train.derived import verified_training, verified_verdict
from replaykit.train.stats import Score, noise, paired, stored_run_stats


def audit(
    store: RunStore, verdict_id: str, criterion: str | None = None, regraded: list[str] | None = None
) -> VerdictAudit:
    """Recompute a verdict from its two stored runs; with ``criterion``, say whether the decision
    would differ (``regraded``: runs of ``replaykit regrade``, the verdict recomputed on them too). The verdict is verified first (``derived.verified_verdict``: its runs against
    their cassettes, its exclusions from its certificates, every field recomputed): a forged one
    is ``store corrupt``, never "reproduced"."""
    doc = verified_verdict(store, verdict_id)
    recorded = doc.verdict  # verified: its exclusions follow from the certificates it names
    baseline, candidate = store.get_run(doc.baseline_run), store.get_run(str(doc.candidate_run))
    own = make_criterion(recorded["criterion"], **recorded["params"])(
        candidate, baseline, recorded.get("excluded")
    )
    out: VerdictAudit = {
        "verdict_id": doc.verdict_id,
        "training_id": doc.training_id,
        "epoch": doc.epoch,
        "baseline_sha": doc.baseline_sha,
        "candidate_sha": doc.candidate_sha,
        "recorded": recorded,
        "recomputed": own.to_dict(),
        "reproduced": own.to_dict() == recorded,
    }
    score: Score = "reward" if recorded["criterion"] == "mean_reward" else "solved"
    out["noise"] = noise(baseline, candidate, recorded.get("excluded"), score)
    out["paired"] = paired(baseline, candidate, recorded.get("excluded"))
    out["facets"] = facets_moved(store, baseline, candidate)
    out["replicates"] = {
        "baseline": stored_run_stats(store, baseline),
        "candidate": stored_run_stats(store, candidate),
    }
    out["attribution"] = attribute(store, baseline, candidate, own.to_dict())  # the recomputed flips
    if (points := stopping_points(store, doc.verdict_id, doc.training_id)) is not None:
        out["adaptive"] = points  # adaptive seeds: the seeds each task took (train/adaptive.py)
    if regraded:
        out["regraded"] = on_regraded(store, baseline, candidate, recorded, regraded)
    if criterion:
        other = make_criterion(criterion)(candidate, baseline, recorded.get("excluded"))
        out["counterfactual"] = {
            "criterion": criterion,
            "verdict": other.to_dict(),
            "differs": other.accept != recorded["accept"],
            "summary": (
                f"under {criterion}: {'accept' if other.accept else 'reject'} ({other.reason}); "
                f"recorded {recorded['criterion']}: {'accept' if recorded['accept'] else 'reject'} ({recorded['reason']})"
            ),
        }
    return out


def facets_moved(store: EpisodeStore, baseline: RunDoc, candidate: RunDoc) -> FacetsMoved:
    """Both runs' calls by facet (``cassette/facets.py``) and how the counts of calls gone wrong moved."""
    before, after = run_facets(store, baseline.cassettes), run_facets(store, candidate.cassettes)
    return {"baseline": before, "candidate": after, "moved": moved(before, after)}


def on_regraded(
    store: RunStore, baseline: RunDoc, candidate: RunDoc, recorded: VerdictRecord, run_ids: list[str]
) -> RegradedVerdict:
    """The verdict's criterion on its runs with each regraded run in place of the run it re-graded."""
    from replaykit.episodes.regrade import regraded_original

    sides = {"baseline": baseline, "candidate": candidate}
    replaced: dict[str, str] = {}
    for run_id in run_ids:
        run = store.get_run(run_id)
        store.check_run(run)
        original = regraded_original(store, run)
        role = next(
            (r for r, side in sides.items() if side.run_id == original.run_id and r not in replaced), None
        )
        if role is None:
            raise ConfigError(
                f"--regraded {run.run_id} regraded run {original.run_id}, which is neither side of this verdict "
                f"(baseline {baseline.run_id}, candidate {candidate.run_id})"
            )
        sides[role], replaced[role] = run, run.run_id
    verdict = make_criterion(recorded["criterion"], **recorded["params"])(
        sides["candidate"], sides["baseline"], recorded.get("excluded")
    )
    return {
        "replaced": replaced,
        "verdict": verdict.to_dict(),
        "differs": verdict.accept != recorded["accept"],
        "summary": f"on the regraded run(s): {'accept' if verdict.accept else 'reject'} ({verdict.reason})",
    }


def replay_document(
    store: RunStore,
    doc_id: str,
    kind: str,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> DocumentReplay:
    """``replay ID`` of a verdict, compare or transfer document (``kind``; a unique prefix is
    enough): the document recomputed from its runs (``derived.verify_document``), then every run
    it reads replayed (``replay_runs``)."""
    from replaykit.train.derived import verify_document

    full = store.resolve_id("runs", doc_id, what=kind)
    verify_document(store, full, kind)
    listed = store.get_doc(full, kind=kind).get("runs")
    runs = [str(r) for r in listed] if isinstance(listed, list) else []
    reports = replay_runs(store, runs, progress=progress, executor=executor)
    return {"id": full, "kind": kind, "identical": all(r["identical"] for r in reports), "runs": reports}


def replay_training(
    store: StoreBackend,
    training_id: str,
    episodes: bool = True,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> TrainingReplay:
    """Re-run a recorded training offline in a scratch copy of its harness repository."""
    from replaykit.train import gitops
    from replaykit.train.documents import stored_estimator
    from replaykit.train.trainer import Trainer

    doc = verified_training(store, training_id, bundle=False)  # the clone below verifies the bundle
    tmp = Path(tempfile.mkdtemp(prefix="replaykit-train-replay-"))
    try:
        gitops.clone_bundle(
            store.get_blob(doc.initial_bundle or ""),
            tmp / "harness",
            doc.initial_sha,
            doc.branch,
            where=f"training {doc.training_id}",
        )
        recorded = RunConfig.recorded(
            {**doc.config, "store": str(store.location)}, f"training {doc.training_id}"
        )
        harness = recorded.harness.model_copy(update={"repo": str(tmp / "harness"), "template": None})
        config = recorded.model_copy(update={"harness": harness})
        config.base_dir = Path(doc.config_base_dir)  # never read: a replay loads no panel
        trainer = Trainer(
            config=config,
            estimator=stored_estimator(store, doc),
            format=doc.training_format,
            record_mode=RecordMode.NONE,
            persist=False,
            store=store,
            progress=progress,
            replay_of=doc,  # its model and keys as recorded: no engine, task folder or Docker needed
        )
        for loss in trainer.epochs(len(doc.epochs)):
            loss.backward()
            trainer.optimizer.step()
        replayed = trainer.summary()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fields = (
        "candidate_sha",
        "decision",
        "loss",
        "skipped",
        "verdict",
        "panels",
        "smoke",
        "candidate_tests",
        "workspace_digest",
        "adaptive",
    )
    epochs: list[EpochReplay] = []
    for rec, rep in zip(doc.epochs, replayed.epochs, strict=False):
        diffs = [f for f in fields if getattr(rec, f) != getattr(rep, f)]
        epochs.append(
            {
                "epoch": rec.epoch,
                "candidate_sha": rec.candidate_sha,
                "replayed_candidate_sha": rep.candidate_sha,
                "decision": rec.decision,
                "replayed_decision": rep.decision,
                "identical": not diffs,
                "differs_in": diffs,
            }
        )
    runs: list[RunReplay] = []
    claims: dict[str, ClaimStatus] = {}  # each distinct episode's reuse claim, checked against its donor
    if episodes:  # every run's episodes in one batch: a training's replay fans out on the executor
        for run_id, report in zip(
            doc.runs, replay_runs(store, list(doc.runs), executor=executor, claims=claims), strict=True
        ):
            runs.append(
                {"run_id": run_id, "identical": report["identical"], "divergence": report["divergence"]}
            )
    same_final = replayed.chain[-1] == doc.chain[-1] and len(doc.epochs) == len(replayed.epochs)
    claimed: TrainingClaims = {}
    if any(status != "none" for status in claims.values()):
        claimed["claims_checked"] = list(claims.values()).count("checked")
        claimed["claims_unchecked"] = sorted(c for c, s in claims.items() if s == "donor absent")
    return {
        **claimed,
        "training_id": doc.training_id,
        "identical": same_final and all(e["identical"] for e in epochs) and all(r["identical"] for r in runs),
        "final_baseline": doc.chain[-1],
        "replayed_final_baseline": replayed.chain[-1],
        "epochs": epochs,
        "runs": runs,
    }
