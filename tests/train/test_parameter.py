"""The seed's Parameter: ``.data`` is the baseline HEAD, ``.grad`` the pending verdict;
``backward()`` sets it, an optimizer's ``step()`` reads it and moves the parameter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replaykit.core.errors import TrainError
from replaykit.episodes.config_paths import TEMPLATES
from replaykit.models.reference.proposer import unified_diff
from replaykit.testing import small_config
from replaykit.train.estimators import PatchQueue
from replaykit.train.optim.base import StepInput
from replaykit.train.optim.greedy import GreedyMonotonic
from replaykit.train.optimizers import OPTIMIZERS, register_optimizer
from replaykit.train.parameter import Parameter
from replaykit.train.trainer import Trainer

SOURCE = (TEMPLATES / "quickstart" / "harness.py").read_text()
COMMENT = unified_diff("harness.py", SOURCE, SOURCE + "# a comment changes nothing the panel sees\n")


class AlwaysPromote:
    """A user's optimizer: promotes every measured candidate, through the Parameter only."""

    name = "always_promote"

    def __init__(self) -> None:
        self.parameter: Parameter | None = None

    def params(self) -> dict[str, Any]:
        return {}

    def parent(self, head: str) -> str:
        return head

    def decide(self, step: StepInput) -> bool:
        return step.measurable

    def state(self) -> dict[str, Any]:
        return {}

    def attach(self, parameter: Parameter) -> None:
        self.parameter = parameter

    def zero_grad(self) -> None:
        assert self.parameter is not None
        self.parameter.zero_grad()

    def step(self) -> None:
        assert self.parameter is not None
        self.parameter.promote()


def trainer_for(tmp_path: Path, **overrides: object) -> Trainer:
    cfg = small_config(tmp_path, tasks=["hello-file"], seeds=[0], **overrides)
    return Trainer(config=cfg, estimator=PatchQueue([COMMENT]))


def test_backward_sets_grad_and_step_consumes_it(tmp_path: Path) -> None:
    trainer = trainer_for(tmp_path)
    param = trainer.parameter
    before = param.data
    assert param.data == trainer.harness.resolve() and param.grad is None
    loss = next(iter(trainer.epochs(1)))
    assert param.grad is None  # the forward pass alone leaves no gradient
    loss.backward()
    assert param.grad is loss and loss.verdict is not None and not loss.verdict.accept  # an exact tie
    trainer.optimizer.step()
    assert param.grad is None and loss.promoted is False and param.data == before
    refs = {r.path: r.commit.hexsha for r in trainer.harness.repo.refs}
    assert refs[f"refs/replaykit/rejected/{trainer.training_id}/epoch-000"] == loss.candidate_sha
    with pytest.raises(TrainError, match=r"before loss\.backward"):
        trainer.optimizer.step()  # the gradient was consumed


def test_a_registered_optimizer_moves_the_parameter(tmp_path: Path) -> None:
    register_optimizer(AlwaysPromote.name, AlwaysPromote)
    try:
        trainer = trainer_for(tmp_path, **{"train.optimizer": {"name": "always_promote"}})
        assert isinstance(trainer.optimizer, AlwaysPromote) and not isinstance(
            trainer.optimizer, GreedyMonotonic
        )
        loss = next(iter(trainer.epochs(1)))
        loss.backward()
        trainer.optimizer.step()
        assert loss.promoted is True and trainer.parameter.data == loss.candidate_sha
        doc = trainer.store.get_training(trainer.training_id)  # the move was saved
        assert doc.chain == [trainer.initial_sha, loss.candidate_sha] and doc.epochs[0].promoted is True
    finally:
        OPTIMIZERS.unregister(AlwaysPromote.name)


def test_zero_grad_drops_a_pending_verdict(tmp_path: Path) -> None:
    trainer = trainer_for(tmp_path)
    loss = next(iter(trainer.epochs(1)))
    loss.backward()
    trainer.optimizer.zero_grad()
    assert trainer.parameter.grad is None
    with pytest.raises(TrainError, match=r"before loss\.backward"):
        trainer.optimizer.step()
