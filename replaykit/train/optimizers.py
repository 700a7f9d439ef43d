"""Optimizers: move the harness parameter (the baseline branch) from its pending verdict.

An optimizer is attached to the trainer's :class:`~replaykit.train.parameter.Parameter`;
``step()`` reads ``parameter.grad`` (the loss ``backward()`` left there) and calls
``parameter.promote()`` or ``parameter.reject()``. Its *policy* is pure
(``parent``/``decide``, see ``optim/base.py``), so offline audits reuse it.
Implementations live one per file in ``optim/`` and register here by name:

- ``greedy_monotonic`` (``GreedyMonotonic``): promote what the criterion accepts;
- ``margin_greedy`` (``MarginGreedy``): also require an improvement margin and/or a
  sign-test significance level over task instances;
- ``pareto_frontier`` (``ParetoFrontier``): keep non-dominated candidates and
  propose from each in turn; the baseline branch still only fast-forwards.

Every candidate stays under ``refs/replaykit/candidates/<training>/epoch-NNN`` and,
by decision, under ``refs/replaykit/accepted/…`` or ``refs/replaykit/rejected/…``.

Add an optimizer with one file: a class following :class:`Optimizer` (subclass
``optim.base.ParameterBound`` and write ``decide``), then ``register_optimizer(name,
cls)`` or an entry point in the ``replaykit.optimizers`` group; configs select it
with ``train.optimizer.name``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from replaykit.core.records import JSON
from replaykit.core.registry import FactoryRegistry
from replaykit.train.optim.base import StepInput
from replaykit.train.optim.frontier import ParetoFrontier
from replaykit.train.optim.greedy import GreedyMonotonic
from replaykit.train.optim.margin import MarginGreedy
from replaykit.train.parameter import Parameter

__all__ = [
    "OPTIMIZERS",
    "Optimizer",
    "make_optimizer",
    "optimizer_names",
    "register_optimizer",
]


class Optimizer(Protocol):
    name: str

    def params(self) -> dict[str, JSON]: ...

    def parent(self, head: str) -> str:
        """The commit the next proposal starts from (greedy: the HEAD)."""
        ...

    def decide(self, step: StepInput) -> bool:
        """Pure: promote this epoch's candidate or not."""
        ...

    def state(self) -> dict[str, JSON]: ...

    def attach(self, parameter: Parameter) -> None: ...

    def zero_grad(self) -> None: ...

    def step(self) -> None:
        """Read ``parameter.grad`` and move the parameter (``promote()`` or ``reject()``)."""
        ...


OPTIMIZERS: FactoryRegistry[Optimizer] = FactoryRegistry("optimizer", "replaykit.optimizers")


def register_optimizer(name: str, factory: Callable[..., Optimizer]) -> None:
    OPTIMIZERS.register(name, factory)


register_optimizer(GreedyMonotonic.name, GreedyMonotonic)
register_optimizer(MarginGreedy.name, MarginGreedy)
register_optimizer(ParetoFrontier.name, ParetoFrontier)


def optimizer_names() -> list[str]:
    return OPTIMIZERS.names()


def make_optimizer(name: str = GreedyMonotonic.name, **params: Any) -> Optimizer:
    """The optimizer ``name`` with ``params`` (validated against its signature: ``FactoryRegistry.create``)."""
    optimizer: Optimizer = OPTIMIZERS.create(name, **params)
    return optimizer
