"""What every optimizer shares: the pure decision input (``StepInput``) and the
PyTorch verbs over the trainer's Parameter (``attach``/``zero_grad``/``step``).

An optimizer's *policy* is two pure methods, so the same object drives a live
training and an offline counterfactual (``replaykit audit TRAINING --optimizer``):

- ``parent(head)``: the commit the next proposal starts from (greedy: the head);
- ``decide(step)``: promote the candidate (fast-forward the baseline branch) or not.
"""

from __future__ import annotations

from dataclasses import dataclass

from replaykit.core.errors import TrainError
from replaykit.core.records import JSON
from replaykit.core.run_doc import RunDoc
from replaykit.train.parameter import Parameter
from replaykit.train.verdicts import Verdict


@dataclass(frozen=True)
class StepInput:
    """One epoch as an optimizer sees it (no git, no store)."""

    epoch: int
    head: str  # the baseline branch HEAD before this step
    baseline_sha: str  # the commit the candidate was proposed from
    candidate_sha: str | None
    verdict: Verdict | None
    skipped: str | None = None
    baseline_run: RunDoc | None = None
    candidate_run: RunDoc | None = None

    @property
    def measurable(self) -> bool:
        return self.verdict is not None and not self.skipped and self.candidate_sha is not None


class ParameterBound:
    """The PyTorch-style verbs over the trainer's :class:`Parameter`; subclasses implement
    ``decide`` (and may override ``parent``)."""

    name = "optimizer"

    def __init__(self) -> None:
        self.parameter: Parameter | None = None

    def params(self) -> dict[str, JSON]:
        return {}

    def parent(self, head: str) -> str:
        return head

    def decide(self, step: StepInput) -> bool:
        """Called once per epoch, skipped ones included; True promotes a measurable candidate."""
        raise NotImplementedError

    def state(self) -> dict[str, JSON]:
        """What the optimizer keeps between steps (shown by audits)."""
        return {}

    def attach(self, parameter: Parameter) -> None:
        self.parameter = parameter

    def zero_grad(self) -> None:
        if self.parameter is not None:
            self.parameter.zero_grad()

    def step(self) -> None:
        """Read ``parameter.grad``, decide, and move the parameter."""
        if self.parameter is None:
            raise TrainError(
                "optimizer.step(): this optimizer drives no parameter; pass it to Trainer(optimizer=...)"
            )
        loss = self.parameter.pending()
        baseline_run, candidate_run = loss.runs()
        step = StepInput(
            loss.epoch,
            self.parameter.data,
            loss.baseline_sha,
            loss.candidate_sha,
            loss.verdict,
            loss.skipped,
            baseline_run,
            candidate_run,
        )
        if self.decide(step) and step.measurable:  # decide sees every epoch (stateful optimizers count them)
            self.parameter.promote()
        else:
            self.parameter.reject()
