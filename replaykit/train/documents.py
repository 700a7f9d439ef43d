"""What a training stores besides cassettes: its document and its verdicts.

The training document (``kind: training``) is rewritten after every move of the
baseline: the spec, the chain of promoted SHAs, every epoch, and what it references
(runs, cassettes, trees, verdicts, blobs — the initial baseline's git bundle and a
patch queue's diff texts), so a bundle can export the whole training and
``replaykit replay`` can rerun it. Each judged epoch stores a verdict
(``kind: verdict``).
"""

from __future__ import annotations

from collections.abc import Callable

from replaykit.cassette.backend import BlobStore
from replaykit.core.records import TrainingDocument
from replaykit.core.verdict_doc import VerdictDoc
from replaykit.models.endpoint import model_id
from replaykit.train import gitops
from replaykit.train.estimators import Estimator, PatchQueue
from replaykit.train.loss import Loss
from replaykit.train.state import TrainingState, epoch_runs


def training_summary(trainer: TrainingState) -> TrainingDocument:
    """The training document's fields (epochs recorded by an earlier run included)."""
    epochs = [lo.to_dict() for lo in trainer.losses] + trainer.recorded[len(trainer.losses) :]
    mid = trainer.model or model_id(trainer.config.model)
    config, estimator, criterion, optimizer = (
        trainer.config,
        trainer.estimator,
        trainer.criterion,
        trainer.optimizer,
    )
    doc: TrainingDocument = {
        "training_id": trainer.training_id,
        "kind": "training",
        "name": config.name,
        "spec_digest": trainer.spec_digest,
        "harness_repo": str(trainer.harness.path),
        "branch": trainer.harness.branch,
        "initial_sha": trainer.initial_sha,
        "final_baseline": trainer.harness.resolve(),
        "chain": trainer.chain(),
        "epochs": epochs,
        "runs": sorted({r for e in epochs for r in epoch_runs(e) if r}),
        "verdicts": [v for e in epochs if (v := e["verdict_id"])],
        "cassettes": [c for e in epochs for c in (e["proposal_cassette"], *e.get("smoke", [])) if c],
        "trees": sorted({s for e in epochs for s in (e["baseline_sha"], e["candidate_sha"]) if s}),
        "estimator": estimator.identity(),
        "criterion": {"name": criterion.name, "params": criterion.params()},
        "optimizer": {"name": optimizer.name, "params": optimizer.params()},
        "model": mid.to_doc(),
        "config": config.model_dump(mode="json"),
        "config_base_dir": str(config.base_dir),
    }
    if trainer.format >= 2:  # absent from format 1's documents: they stay as recorded
        doc["format"] = trainer.format
    return doc


class TrainingDocuments:
    """Writes one training's verdicts and document (``summary``: its fields, as the Trainer
    gives them); the bundle and diff blobs are stored once."""

    def __init__(self, state: TrainingState, summary: Callable[[], TrainingDocument]) -> None:
        self.trainer = state
        self.summary = summary
        self._bundle: str | None = None
        self._diffs: list[str] | None = None

    def put_verdict(self, loss: Loss) -> None:
        """Store an epoch's verdict (what ``loss.backward()`` records), if it has one."""
        trainer = self.trainer
        if loss.verdict is None or not trainer.persist:
            return
        doc = VerdictDoc(
            verdict_id=str(loss.verdict_id),
            training_id=trainer.training_id,
            epoch=loss.epoch,
            baseline_run=loss.baseline_run,
            candidate_run=loss.candidate_run,
            baseline_sha=loss.baseline_sha,
            candidate_sha=loss.candidate_sha,
            verdict=loss.verdict.to_dict(),
            certificates=list(loss.certificates),
            certified=loss.certified,
        )
        trainer.store.put_doc(
            doc.verdict_id,
            "verdict",
            doc.to_json(),
            name=trainer.config.name,
            harness_sha=loss.candidate_sha or "",
            config_digest=trainer.spec_digest,
        )

    def save(self) -> None:
        """Write the training document (``summary()`` plus its blobs)."""
        trainer = self.trainer
        if not trainer.persist:
            return
        doc = self.summary()
        store = trainer.store
        if self._bundle is None:
            self._bundle = store.put_blob(gitops.git_bundle(trainer.harness.repo, trainer.initial_sha))
        bundle = self._bundle
        doc["initial_bundle"] = bundle
        doc["blobs"] = [bundle]
        estimator = trainer.estimator
        if isinstance(estimator, PatchQueue):  # the diff texts travel with the training (replay, bundles)
            if self._diffs is None:
                self._diffs = [store.put_blob(d.encode("utf-8")) for d in estimator.diffs]
            doc["patch_queue"] = {"diffs": self._diffs, "descriptions": list(estimator.descriptions)}
            doc["blobs"] = [bundle, *self._diffs]
        config = trainer.config
        store.put_doc(
            trainer.training_id,
            "training",
            dict(doc),
            name=config.name,
            harness_sha=trainer.initial_sha,
            model=config.model.name,
            endpoint=(trainer.model or model_id(config.model)).endpoint,
            config_digest=trainer.spec_digest,
        )


def stored_estimator(store: BlobStore, doc: TrainingDocument) -> Estimator | None:
    """A recorded training's patch queue, read from the store (not from the diff files,
    which may be elsewhere or gone); ``None`` for other estimators and older trainings."""
    queue = doc.get("patch_queue")
    if not queue:
        return None
    return PatchQueue([store.get_blob(h).decode("utf-8") for h in queue["diffs"]], queue.get("descriptions"))
