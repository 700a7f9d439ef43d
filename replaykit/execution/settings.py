"""What an executor kind is: the ``Executor`` it builds, the model of its own keys
(``executor: {kind: ray, address: …}``), validated when a config is loaded and handed to the
kind's factory typed, and ``ExecutorKind[S]``, the factory and that model together.

``Executor`` is the seam every kind implements (``map`` over independent jobs).
``ExecutorSettings`` is the base of a kind's keys (unknown keys are errors; a kind without
settings of its own accepts none); ``local`` has ``LocalSettings`` (``executor.py``), ``ray``
``RaySettings`` (``ray_executor.py``). ``ExecutorKind[S]`` is what the registry holds: a
factory ``(S, NodeNeeds) -> Executor`` and ``S``, its model; ``build`` checks that the
settings it is handed are that model's before the factory gets them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar  # a default (PEP 696) on Python 3.11

from replaykit.core.errors import ConfigError
from replaykit.envs.base import NodeNeeds

J = TypeVar("J")
R = TypeVar("R")


class Executor(Protocol):
    def map(self, fn: Callable[[J], R], jobs: Iterable[J], batch: bool = False) -> Iterator[tuple[J, R]]:
        """Yield ``(job, fn(job))`` as each finishes. ``batch``: the jobs are short (offline
        replays), so the executor may run several per dispatch to save its per-job cost."""
        ...


class ExecutorSettings(BaseModel):
    """Base of an executor kind's own keys (beside ``kind``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def concurrency(self) -> int:
        """How many episodes this executor runs at once on this machine (the probe's load)."""
        return 1


#: an executor kind's settings model (``ExecutorKind[S]``)
S = TypeVar("S", bound=ExecutorSettings, default=ExecutorSettings)

#: (the kind's settings, what the episodes' env kind asks of worker nodes) → an ``Executor``
ExecutorFactory = Callable[[S, NodeNeeds], Executor]


@dataclass(frozen=True)
class ExecutorKind(Generic[S]):
    """One executor kind: its factory and the model of its own keys, which the factory gets."""

    factory: ExecutorFactory[S]
    #: the default, for a kind with no keys of its own, is ``ExecutorKind[ExecutorSettings]``'s
    settings: type[S] = ExecutorSettings  # type: ignore[assignment]

    def build(self, settings: ExecutorSettings, needs: NodeNeeds) -> Executor:
        """The executor of ``settings`` (an ``executor`` section's, validated under this kind)."""
        if not isinstance(settings, self.settings):
            raise ConfigError(
                f"an executor kind of {self.settings.__name__} was handed {type(settings).__name__}: "
                "its section was validated under another kind"
            )
        return self.factory(settings, needs)
