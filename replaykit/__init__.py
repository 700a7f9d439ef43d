"""replaykit: train agent harnesses and replay every run bit-for-bit.

Public names are imported lazily so ``import replaykit`` has no side effects and
stays cheap; the ``TYPE_CHECKING`` block lets type checkers see the real classes.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replaykit.episodes.config import load_config
    from replaykit.core.errors import ReplaykitError
    from replaykit.models.codex import CodexAgentBackend
    from replaykit.episodes.run import measure
    from replaykit.train.criteria import MeanReward, StrictPareto
    from replaykit.train.estimators import AgenticEstimator, OpenAIBackend, PatchQueue
    from replaykit.train.loss import Loss
    from replaykit.train.optimizers import GreedyMonotonic
    from replaykit.train.trainer import Trainer

__version__ = "0.1.0"

__all__ = [
    "AgenticEstimator",
    "CodexAgentBackend",
    "GreedyMonotonic",
    "Loss",
    "MeanReward",
    "OpenAIBackend",
    "PatchQueue",
    "ReplaykitError",
    "StrictPareto",
    "Trainer",
    "load_config",
    "measure",
]

_EXPORTS: dict[str, str] = {
    "ReplaykitError": "replaykit.core.errors",
    "Trainer": "replaykit.train.trainer",
    "Loss": "replaykit.train.loss",
    "AgenticEstimator": "replaykit.train.estimators",
    "PatchQueue": "replaykit.train.estimators",
    "OpenAIBackend": "replaykit.train.estimators",
    "StrictPareto": "replaykit.train.criteria",
    "MeanReward": "replaykit.train.criteria",
    "GreedyMonotonic": "replaykit.train.optimizers",
    "CodexAgentBackend": "replaykit.models.codex",
    "load_config": "replaykit.episodes.config",
    "measure": "replaykit.episodes.run",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replaykit' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
