"""replaykit: train agent harnesses and replay every run bit-for-bit.

Public names are imported lazily so ``import replaykit`` has no side effects and
stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "ReplaykitError": "replaykit.errors",
    "Trainer": "replaykit.train.trainer",
    "Loss": "replaykit.train.loss",
    "AgenticEstimator": "replaykit.train.estimators",
    "PatchQueue": "replaykit.train.estimators",
    "OpenAIBackend": "replaykit.train.estimators",
    "StrictPareto": "replaykit.train.criteria",
    "MeanReward": "replaykit.train.criteria",
    "GreedyMonotonic": "replaykit.train.optimizers",
    "CodexAgentBackend": "replaykit.models.codex",
    "load_config": "replaykit.config",
    "measure": "replaykit.run",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replaykit' has no attribute {name!r}")
    return getattr(import_module(module), name)


__all__ = sorted(_EXPORTS)
