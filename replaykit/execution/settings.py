"""What an executor kind's own keys are: a settings model per kind (``executor: {kind: ray,
address: …}``), validated when a config is loaded and handed to the kind's factory typed.

``ExecutorSettings`` is the base (unknown keys are errors; a kind without settings of its
own accepts none); ``local`` has ``LocalSettings`` (``executor.py``), ``ray`` ``RaySettings``
(``ray_executor.py``). ``ExecutorKind`` is what the registry holds: the factory and its model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from replaykit.envs.base import NodeNeeds


class ExecutorSettings(BaseModel):
    """Base of an executor kind's own keys (beside ``kind``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def concurrency(self) -> int:
        """How many episodes this executor runs at once on this machine (the probe's load)."""
        return 1


#: (the kind's settings, what the episodes' env kind asks of worker nodes) → an
#: ``executor.Executor`` (typed where it is built: ``select.make_executor``)
ExecutorFactory = Callable[[Any, NodeNeeds], Any]


@dataclass(frozen=True)
class ExecutorKind:
    """One executor kind: its factory and the model of its own keys."""

    factory: ExecutorFactory
    settings: type[ExecutorSettings] = ExecutorSettings
