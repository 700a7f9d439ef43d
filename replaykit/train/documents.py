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
from replaykit.core.run_doc import ModelRef
from replaykit.core.training_doc import NamedParams, PatchQueueDoc, TrainingDoc
from replaykit.core.verdict_doc import VerdictDoc
from replaykit.models.endpoint import model_id
from replaykit.train import gitops
from replaykit.train.estimators import Estimator, PatchQueue
from replaykit.train.loss import Loss
from replaykit.train.state import TrainingState


def training_summary(trainer: TrainingState) -> TrainingDoc:
    """The training document (epochs recorded by an earlier run included; what it references
    derived from its epochs), without its blobs (``TrainingDocuments.save`` adds them)."""
    epochs = [lo.to_record() for lo in trainer.losses] + trainer.recorded[len(trainer.losses) :]
    config, estimator, criterion, optimizer = (
        trainer.config,
        trainer.estimator,
        trainer.criterion,
        trainer.optimizer,
    )
    return TrainingDoc(
        training_id=trainer.training_id,
        name=config.name,
        spec_digest=trainer.spec_digest,
        harness_repo=str(trainer.harness.path),
        branch=trainer.harness.branch,
        initial_sha=trainer.initial_sha,
        final_baseline=trainer.harness.resolve(),
        chain=trainer.chain(),
        epochs=epochs,
        estimator=estimator.identity(),
        criterion=NamedParams(name=criterion.name, params=criterion.params()),
        optimizer=NamedParams(name=optimizer.name, params=optimizer.params()),
        model=ModelRef.of(trainer.model or model_id(trainer.config.model)),
        config=config.model_dump(mode="json"),
        config_base_dir=str(config.base_dir),
        # absent from format 1's documents: they stay as recorded
        format=trainer.format if trainer.format >= 2 else None,
    )


class TrainingDocuments:
    """Writes one training's verdicts and document (``summary``: its fields, as the Trainer
    gives them); the bundle and diff blobs are stored once."""

    def __init__(self, state: TrainingState, summary: Callable[[], TrainingDoc]) -> None:
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
        blobs, queue = [bundle], None
        estimator = trainer.estimator
        if isinstance(estimator, PatchQueue):  # the diff texts travel with the training (replay, bundles)
            if self._diffs is None:
                self._diffs = [store.put_blob(d.encode("utf-8")) for d in estimator.diffs]
            queue = PatchQueueDoc(diffs=self._diffs, descriptions=list(estimator.descriptions))
            blobs = [bundle, *self._diffs]
        doc = doc.replaced(initial_bundle=bundle, blobs=blobs, patch_queue=queue)
        config = trainer.config
        store.put_doc(
            trainer.training_id,
            "training",
            doc.to_json(),
            name=config.name,
            harness_sha=trainer.initial_sha,
            model=config.model.name,
            endpoint=(trainer.model or model_id(config.model)).endpoint,
            config_digest=trainer.spec_digest,
        )


def stored_estimator(store: BlobStore, doc: TrainingDoc) -> Estimator | None:
    """A recorded training's patch queue, read from the store (not from the diff files,
    which may be elsewhere or gone); ``None`` for other estimators and older trainings."""
    queue = doc.patch_queue
    if not queue:
        return None
    return PatchQueue([store.get_blob(h).decode("utf-8") for h in queue.diffs], queue.descriptions)
