"""Loss: one epoch's verdict on (candidate, baseline), with PyTorch's verbs.

``loss.backward()`` persists the verdict and its evidence (both runs' cassettes,
per-task movement) and sets the harness parameter's ``.grad`` to this loss;
``optimizer.step()`` then reads it and promotes or rejects the candidate.
``loss.promoted`` is defined after ``step()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from replaykit.core.errors import TrainError
from replaykit.core.records import EpochRecord, RunDoc
from replaykit.train.criteria import Verdict

if TYPE_CHECKING:
    from replaykit.train.trainer import Trainer


@dataclass
class Loss:
    trainer: Trainer
    epoch: int
    baseline_sha: str
    baseline_run: str
    candidate_sha: str | None = None
    candidate_run: str | None = None
    description: str = ""
    verdict: Verdict | None = None
    skipped: str | None = None  # the reason an epoch proposed nothing measurable
    proposal_cassette: str | None = None
    changed: list[str] = field(default_factory=list)
    backward_done: bool = False
    _promoted: bool | None = None

    @property
    def value(self) -> float:
        return self.verdict.loss if self.verdict else 0.0

    def item(self) -> float:
        return self.value

    @property
    def accept(self) -> bool:
        return bool(self.verdict and self.verdict.accept and not self.skipped)

    @property
    def promoted(self) -> bool:
        if self._promoted is None:
            raise TrainError(f"loss.promoted of epoch {self.epoch} is defined after optimizer.step()")
        return self._promoted

    @promoted.setter
    def promoted(self, value: bool) -> None:
        self._promoted = bool(value)

    @property
    def promoted_or_none(self) -> bool | None:
        """``promoted``, or None before ``optimizer.step()``."""
        return self._promoted

    @property
    def verdict_id(self) -> str | None:
        return self.trainer.verdict_id(self) if self.verdict else None

    def runs(self) -> tuple[RunDoc | None, RunDoc | None]:
        """The stored baseline and candidate runs (None where there is none)."""
        store = self.trainer.store
        return (
            store.get_run(self.baseline_run) if self.baseline_run else None,
            store.get_run(self.candidate_run) if self.candidate_run else None,
        )

    def backward(self) -> None:
        """Persist the verdict (evidence included) and set the parameter's ``.grad`` to this loss."""
        self.trainer.record_verdict(self)
        self.backward_done = True
        self.trainer.parameter.grad = self

    def to_dict(self) -> EpochRecord:
        return {
            "epoch": self.epoch,
            "baseline_sha": self.baseline_sha,
            "baseline_run": self.baseline_run,
            "candidate_sha": self.candidate_sha,
            "candidate_run": self.candidate_run,
            "description": self.description,
            "skipped": self.skipped,
            "proposal_cassette": self.proposal_cassette,
            "changed": self.changed,
            "verdict_id": self.verdict_id,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "loss": self.value,
            "decision": "skipped" if self.skipped else ("accepted" if self.accept else "rejected"),
            "promoted": self._promoted,
        }
