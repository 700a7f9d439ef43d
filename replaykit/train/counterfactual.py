"""Counterfactual training replay: "had we judged with X (or stepped with Y), where
would this training have ended, and how much of that is known without a model call?"

``counterfactual(store, TRAINING_ID, criterion="mean_reward", optimizer=None)`` walks
the recorded epochs in order. While the counterfactual baseline equals the recorded
one, the recorded candidate and both runs come from cassettes. Where a decision
differs, the later epochs' recorded proposals (diffs) are re-applied to the new
baseline in a scratch clone (the proposer is NOT asked again: the approximation is
named in the report); a diff that no longer applies is a skipped epoch, as live. A
measurement is reused whenever its cassette key is in the store, whoever recorded
it. The walk stops at the first epoch whose episodes were never recorded and names
exactly those episodes (the walk itself: ``walk.py``). The recorded training is verified
first (``derived.verified_training``): a forged one is ``store corrupt``, never
"reproduced". Reading only: the store is never written.
"""

from __future__ import annotations

from replaykit.cassette.backend import RunStore
from replaykit.core.progress import Progress
from replaykit.core.records import JSON
from replaykit.core.training_doc import TrainingDoc
from replaykit.train.audit_records import CounterfactualReport, FinalRate, WalkResult
from replaykit.train.config import train_config
from replaykit.train.derived import verified_training
from replaykit.train.scratch import Proposal, Scratch
from replaykit.train.walk import (
    Measurements,
    chosen,
    recorded_criterion,
    recorded_optimizer,
    spec_text,
    training_config,
    walk,
)

APPROXIMATION = (
    "after the first divergence, each later epoch re-applies the recorded proposal (its diff) to the "
    "counterfactual baseline; the proposer is not asked again, though its brief would have differed"
)


def counterfactual(
    store: RunStore,
    training_id: str,
    criterion: str | None = None,
    optimizer: str | None = None,
    progress: Progress | None = None,
) -> CounterfactualReport:
    """The counterfactual report of a recorded training (``criterion``/``optimizer``: ``NAME[:k=v,...]``; default: as recorded)."""
    doc = verified_training(store, training_id, bundle=False)  # a forged training reproduces nothing
    config = training_config(doc, store)
    rec_crit, rec_opt = recorded_criterion(doc), recorded_optimizer(doc)
    crit, opt = chosen(doc, criterion, optimizer)
    tcfg = train_config(config)
    measurements = Measurements(store, doc, config)
    with Scratch(store, doc, config.harness.entry, tcfg.patch_surface) as scratch:
        proposals = scratch.proposals()
        result = walk(store, doc, scratch, proposals, measurements, crit, opt, progress)
    return report(
        doc,
        result,
        measurements,
        proposals,
        (crit.name, crit.params()),
        (opt.name, opt.params()),
        rec_crit,
        rec_opt,
    )


def report(
    doc: TrainingDoc,
    result: WalkResult,
    measurements: Measurements,
    proposals: list[Proposal],
    crit: tuple[str, dict[str, JSON]],
    opt: tuple[str, dict[str, JSON]],
    rec_crit: tuple[str, dict[str, JSON]],
    rec_opt: tuple[str, dict[str, JSON]],
) -> CounterfactualReport:
    rows = result["rows"]
    complete = result["blocked_at"] is None
    rec_final = doc.chain[-1]
    diverged = next(
        (
            r["epoch"]
            for r in rows
            if r["counterfactual_baseline"] and r["counterfactual_baseline"] != r["recorded_baseline"]
        ),
        None,
    )
    offline = sum(r["offline"] for r in rows)
    same_spec = crit == rec_crit and opt[0] == rec_opt[0] and opt[1] == rec_opt[1]
    return {
        "training_id": doc.training_id,
        "kind": "counterfactual",
        "criterion": {"name": crit[0], "params": crit[1], "spec": spec_text(*crit)},
        "optimizer": {"name": opt[0], "params": opt[1], "spec": spec_text(*opt)},
        "recorded_criterion": {"name": rec_crit[0], "params": rec_crit[1]},
        "recorded_optimizer": {"name": rec_opt[0], "params": rec_opt[1]},
        "same_as_recorded": same_spec,
        "approximation": APPROXIMATION,
        "epochs": rows,
        "flipped": [r["epoch"] for r in rows if r["flipped"]],
        "reapplied": [r["epoch"] for r in rows if r["reapplied"]],
        "diverged_at": diverged,
        "complete": complete,
        "offline_epochs": offline,
        "offline_share": offline / max(len(rows), 1),
        "accepted": sum(r["counterfactual_decision"] == "accepted" for r in rows),
        "recorded_accepted": sum(r["recorded_decision"] == "accepted" for r in rows),
        "final": {
            "recorded": measurements.rate(rec_final),
            "counterfactual": FinalRate(
                **measurements.rate(result["head"] if complete else None),
                determined=complete,
                last_known=result["head"],
            ),
        },
        "reproduces_recorded": complete
        and not any(r["flipped"] for r in rows)
        and result["head"] == rec_final,
        "needs_recording": result["needs_recording"],
        "optimizer_state": result["optimizer_state"],
        "proposals": [
            {
                "epoch": p.epoch,
                "description": p.description,
                "has_diff": p.diff is not None,
                "reason": p.reason,
            }
            for p in proposals
        ],
    }
