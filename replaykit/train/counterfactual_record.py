"""``replaykit audit TRAINING_ID --criterion X --record``: continue a counterfactual live.

The counterfactual becomes a real training of its own: the recorded proposals are
re-applied in order by a ``recorded_proposals`` estimator (still no proposer call),
missing episodes are recorded (record mode ``once``), and the training gets its own
id, its own refs (``refs/replaykit/*/<its id>/…``) and its own baseline branch
``replaykit/counterfactual/<id>`` in the original harness repository — the original
branch is never moved. Its document links back (``counterfactual_of``), and
``replaykit replay`` replays it like any training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import git

from replaykit.cassette.backend import RunStore
from replaykit.core.determinism import digest_of
from replaykit.core.errors import CassetteNotFound, HarnessError
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress
from replaykit.core.training_doc import CounterfactualOf, NamedParams, TrainingDoc
from replaykit.episodes.config import RunConfig
from replaykit.train.audit_records import RecordedAudit, RecordedCounterfactual
from replaykit.train.config import train_config
from replaykit.train.counterfactual import counterfactual
from replaykit.train.derived import verified_training
from replaykit.train.loss import Loss
from replaykit.train.scratch import Scratch
from replaykit.train.trainer import Trainer
from replaykit.train.walk import chosen, training_config

BRANCH_ROOT = "replaykit/counterfactual"


class LinkedTrainer(Trainer):
    """A Trainer whose training document names the training it is a counterfactual of."""

    def __init__(self, *args: Any, link: CounterfactualOf, **kwargs: Any) -> None:
        self.link = link
        super().__init__(*args, **kwargs)

    def summary(self) -> TrainingDoc:
        return super().summary().replaced(counterfactual_of=self.link)

    def record_verdict(self, loss: Loss) -> None:
        """A verdict already stored (same two runs, same criterion: the same verdict) keeps its document, so it
        stays attributed to the training that recorded it first; this training lists it all the same."""
        vid = loss.verdict_id
        if vid and self.persist:
            try:
                if self.store.doc_kind(vid) == "verdict":
                    self._save()
                    return
            except CassetteNotFound:
                pass
        super().record_verdict(loss)


def _harness_repo(doc: TrainingDoc) -> git.Repo:
    path = Path(doc.harness_repo)
    try:
        repo = git.Repo(path)
        repo.git.cat_file("-e", f"{doc.initial_sha}^{{commit}}")
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitCommandError):
        raise HarnessError(
            f"--record needs the training's harness repository {path} (holding {doc.initial_sha[:10]}); "
            "restore it, or audit without --record"
        ) from None
    return repo


def recorded_audit(live: RecordedCounterfactual) -> RecordedAudit:
    """What ``audit TRAINING --record --json`` prints: the audit, the recorded training's id and
    its branch."""
    of = live["training"].counterfactual_of
    return {
        **live["audit"],
        "recorded_training": live["training"].training_id,
        "recorded_branch": (of.branch or "") if of else "",
    }


def record_counterfactual(
    store: RunStore,
    training_id: str,
    criterion: str | None = None,
    optimizer: str | None = None,
    progress: Progress | None = None,
) -> RecordedCounterfactual:
    """Run the counterfactual as a live training (recording what is missing); return it and the offline audit after."""
    doc = verified_training(store, training_id, bundle=False)
    config = training_config(doc, store)
    crit, opt = chosen(doc, criterion, optimizer)  # validate before any write
    tcfg = train_config(config)
    with Scratch(store, doc, config.harness.entry, tcfg.patch_surface) as scratch:
        proposals = scratch.proposals()
    repo = _harness_repo(doc)
    link = CounterfactualOf(
        training_id=doc.training_id,
        criterion=NamedParams(name=crit.name, params=crit.params()),
        optimizer=NamedParams(name=opt.name, params=opt.params()),
    )
    branch = f"{BRANCH_ROOT}/{digest_of(link.to_json())[:12]}"
    if f"refs/heads/{branch}" not in {r.path for r in repo.refs}:
        repo.git.branch(branch, doc.initial_sha)
    data = config.model_dump(mode="json")
    data["harness"] = dict(
        data["harness"], repo=str(Path(doc.harness_repo).resolve()), branch=branch, template=None
    )
    data["train"] = dict(
        data.get("train") or {},
        epochs=len(doc.epochs),
        estimator={
            "kind": "recorded_proposals",
            "training": doc.training_id,
            "diffs": [p.diff for p in proposals],
            "descriptions": [p.description for p in proposals],
            "reasons": [p.reason for p in proposals],
        },
        criterion={"name": crit.name, **crit.params()},
        optimizer={"name": opt.name, **opt.params()},
    )
    live = RunConfig.recorded(data, f"training {doc.training_id}")
    live.base_dir = config.base_dir
    trainer = LinkedTrainer(
        config=live,
        record_mode=RecordMode.ONCE,
        store=store,
        progress=progress,
        link=link.replaced(branch=branch),
    )
    for loss in trainer.epochs(len(doc.epochs)):
        loss.backward()
        trainer.optimizer.step()
    summary = trainer.summary()
    return {"training": summary, "audit": counterfactual(store, training_id, criterion, optimizer, progress)}
