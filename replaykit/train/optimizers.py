"""Optimizers: move the harness parameter (the baseline branch) from a verdict.

``GreedyMonotonic``: accept → fast-forward the baseline branch to the candidate
(never any other move); reject → keep the candidate under a ref. Every candidate
stays under ``refs/replaykit/candidates/<training>/epoch-NNN`` and, by decision,
under ``refs/replaykit/accepted/…`` or ``refs/replaykit/rejected/…``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from replaykit.errors import ConfigError
from replaykit.train.gitops import TrainError

if TYPE_CHECKING:
    from replaykit.train.loss import Loss
    from replaykit.train.trainer import Trainer


class GreedyMonotonic:
    name = "greedy_monotonic"

    def __init__(self) -> None:
        self.trainer: "Trainer | None" = None
        self._pending: "Loss | None" = None

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
        self.trainer._step(loss, promote=loss.accept)
        self._pending = None


_OPTIMIZERS: dict[str, Callable[..., Any]] = {GreedyMonotonic.name: GreedyMonotonic}


def make_optimizer(name: str = GreedyMonotonic.name, **params: Any) -> GreedyMonotonic:
    if name not in _OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {name!r}; known: {', '.join(sorted(_OPTIMIZERS))}")
    return _OPTIMIZERS[name](**params)
