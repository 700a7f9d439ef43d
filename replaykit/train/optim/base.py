"""What every optimizer shares: the pure decision input (``StepInput``) and the
PyTorch verbs bound to a Trainer (``attach``/``receive``/``zero_grad``/``step``).

An optimizer's *policy* is two pure methods, so the same object drives a live
training and an offline counterfactual (``replaykit audit TRAINING --optimizer``):

- ``parent(head)``: the commit the next proposal starts from (greedy: the head);
- ``decide(step)``: promote the candidate (fast-forward the baseline branch) or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replaykit.train.criteria import Verdict
from replaykit.train.gitops import TrainError

if TYPE_CHECKING:
    from replaykit.train.loss import Loss
    from replaykit.train.trainer import Trainer


@dataclass(frozen=True)
class StepInput:
    """One epoch as an optimizer sees it (no git, no store)."""

    epoch: int
    head: str  # the baseline branch HEAD before this step
    baseline_sha: str  # the commit the candidate was proposed from
    candidate_sha: str | None
    verdict: Verdict | None
    skipped: str | None = None
    baseline_run: dict[str, Any] | None = None
    candidate_run: dict[str, Any] | None = None

    @property
    def measurable(self) -> bool:
        return self.verdict is not None and not self.skipped and self.candidate_sha is not None


class TrainerBound:
    """The PyTorch-style verbs; subclasses implement ``decide`` (and may override ``parent``)."""

    name = "optimizer"

    def __init__(self) -> None:
        self.trainer: "Trainer | None" = None
        self._pending: "Loss | None" = None

    def params(self) -> dict[str, Any]:
        return {}

    def parent(self, head: str) -> str:
        return head

    def decide(self, step: StepInput) -> bool:
        """Called once per epoch, skipped ones included; True promotes a measurable candidate."""
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        """What the optimizer keeps between steps (shown by audits)."""
        return {}

    def attach(self, trainer: "Trainer") -> None:
        self.trainer = trainer

    def receive(self, loss: "Loss") -> None:
        self._pending = loss

    def zero_grad(self) -> None:
        self._pending = None

    def step(self) -> None:
        loss = self._pending
        if loss is None or not loss.backward_done:
            raise TrainError("optimizer.step() called before loss.backward(): call loss.backward() first")
        assert self.trainer is not None
        trainer = self.trainer
        runs = {r: trainer.store.get_run(r) for r in (loss.baseline_run, loss.candidate_run) if r}
        step = StepInput(
            loss.epoch,
            trainer.harness.resolve(),
            loss.baseline_sha,
            loss.candidate_sha,
            loss.verdict,
            loss.skipped,
            runs.get(loss.baseline_run),
            runs.get(loss.candidate_run) if loss.candidate_run else None,
        )
        promote = bool(
            self.decide(step) and step.measurable
        )  # decide sees every epoch (stateful optimizers count them)
        trainer._step(loss, promote=promote)
        self._pending = None
