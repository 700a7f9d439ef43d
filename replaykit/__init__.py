"""replaykit: train agent harnesses and replay every run bit-for-bit.

The public API is what this module exports (``__all__``) plus the modules listed in
docs/api.md; everything else is internal and may change in any release. A public name
that moves keeps a deprecated alias for one minor version (``core/deprecation.py``).

Public names are imported lazily so ``import replaykit`` has no side effects and
stays cheap; the ``TYPE_CHECKING`` block lets type checkers see the real classes.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replaykit.cassette.stores import register_store
    from replaykit.core.errors import ConfigError, ReplaykitError
    from replaykit.core.modes import RecordMode
    from replaykit.core.run_doc import EpisodeSummary, RunDoc
    from replaykit.core.verdict_doc import VerdictDoc
    from replaykit.envs.base import EnvKind, EnvSettings
    from replaykit.envs.registry import register_env
    from replaykit.episodes.config import RunConfig, load_config
    from replaykit.episodes.run import measure
    from replaykit.execution.registry import register_executor
    from replaykit.models.codex import CodexAgentBackend
    from replaykit.train.backends import register_backend
    from replaykit.train.criteria import MeanReward, StrictPareto, register_criterion
    from replaykit.train.estimators import AgenticEstimator, PatchQueue, register_estimator
    from replaykit.train.loss import Loss
    from replaykit.train.openai_backend import OpenAIBackend
    from replaykit.train.optim.greedy import GreedyMonotonic
    from replaykit.train.optimizers import register_optimizer
    from replaykit.train.trainer import Trainer
    from replaykit.train.verdicts import Verdict

__version__ = "0.1.0"

__all__ = [
    "AgenticEstimator",
    "CodexAgentBackend",
    "ConfigError",
    "EnvKind",
    "EnvSettings",
    "EpisodeSummary",
    "GreedyMonotonic",
    "Loss",
    "MeanReward",
    "OpenAIBackend",
    "PatchQueue",
    "RecordMode",
    "ReplaykitError",
    "RunConfig",
    "RunDoc",
    "StrictPareto",
    "Trainer",
    "Verdict",
    "VerdictDoc",
    "load_config",
    "measure",
    "register_backend",
    "register_criterion",
    "register_env",
    "register_estimator",
    "register_executor",
    "register_optimizer",
    "register_store",
]

_EXPORTS: dict[str, str] = {
    "Trainer": "replaykit.train.trainer",
    "Loss": "replaykit.train.loss",
    "RecordMode": "replaykit.core.modes",
    "AgenticEstimator": "replaykit.train.estimators",
    "PatchQueue": "replaykit.train.estimators",
    "OpenAIBackend": "replaykit.train.openai_backend",
    "CodexAgentBackend": "replaykit.models.codex",
    "StrictPareto": "replaykit.train.criteria",
    "MeanReward": "replaykit.train.criteria",
    "Verdict": "replaykit.train.verdicts",
    "GreedyMonotonic": "replaykit.train.optim.greedy",
    "RunConfig": "replaykit.episodes.config",
    "load_config": "replaykit.episodes.config",
    "measure": "replaykit.episodes.run",
    "RunDoc": "replaykit.core.run_doc",
    "EpisodeSummary": "replaykit.core.run_doc",
    "VerdictDoc": "replaykit.core.verdict_doc",
    "ReplaykitError": "replaykit.core.errors",
    "ConfigError": "replaykit.core.errors",
    "EnvKind": "replaykit.envs.base",
    "EnvSettings": "replaykit.envs.base",
    "register_env": "replaykit.envs.registry",
    "register_executor": "replaykit.execution.registry",
    "register_criterion": "replaykit.train.criteria",
    "register_optimizer": "replaykit.train.optimizers",
    "register_estimator": "replaykit.train.estimators",
    "register_backend": "replaykit.train.backends",
    "register_store": "replaykit.cassette.stores",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replaykit' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
