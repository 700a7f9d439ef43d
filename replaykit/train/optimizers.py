"""Optimizers: move the harness parameter (the baseline branch) from a verdict.

The protocol is PyTorch's verbs (``attach``/``receive``/``zero_grad``/``step``) plus
a pure policy (``parent``/``decide``, see ``optim/base.py``) that offline audits
reuse. Implementations live one per file in ``optim/`` and register here by name:

- ``greedy_monotonic`` (``GreedyMonotonic``): promote what the criterion accepts;
- ``margin_greedy`` (``MarginGreedy``): also require an improvement margin and/or a
  sign-test significance level over task instances;
- ``pareto_frontier`` (``ParetoFrontier``): keep non-dominated candidates and
  propose from each in turn; the baseline branch still only fast-forwards.

Every candidate stays under ``refs/replaykit/candidates/<training>/epoch-NNN`` and,
by decision, under ``refs/replaykit/accepted/…`` or ``refs/replaykit/rejected/…``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from replaykit.errors import ConfigError
from replaykit.train.optim.base import StepInput
from replaykit.train.optim.frontier import ParetoFrontier
from replaykit.train.optim.greedy import GreedyMonotonic
from replaykit.train.optim.margin import MarginGreedy

if TYPE_CHECKING:
    from replaykit.train.loss import Loss
    from replaykit.train.trainer import Trainer

__all__ = [
    "GreedyMonotonic",
    "MarginGreedy",
    "Optimizer",
    "ParetoFrontier",
    "StepInput",
    "make_optimizer",
    "register_optimizer",
]


class Optimizer(Protocol):
    name: str

    def params(self) -> dict[str, Any]: ...

    def parent(self, head: str) -> str: ...

    def decide(self, step: StepInput) -> bool: ...

    def state(self) -> dict[str, Any]: ...

    def attach(self, trainer: "Trainer") -> None: ...

    def receive(self, loss: "Loss") -> None: ...

    def zero_grad(self) -> None: ...

    def step(self) -> None: ...


_OPTIMIZERS: dict[str, Callable[..., Optimizer]] = {}


def register_optimizer(name: str, factory: Callable[..., Optimizer]) -> None:
    _OPTIMIZERS[name] = factory


register_optimizer(GreedyMonotonic.name, GreedyMonotonic)
register_optimizer(MarginGreedy.name, MarginGreedy)
register_optimizer(ParetoFrontier.name, ParetoFrontier)


def optimizer_names() -> list[str]:
    return sorted(_OPTIMIZERS)


def make_optimizer(name: str = GreedyMonotonic.name, **params: Any) -> Optimizer:
    if name not in _OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {name!r}; known: {', '.join(sorted(_OPTIMIZERS))}")
    try:
        return _OPTIMIZERS[name](**params)
    except TypeError as exc:
        raise ConfigError(f"optimizer {name!r}: bad parameters {params}: {exc}") from None
