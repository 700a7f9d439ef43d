"""The ``train:`` section of a run config (epochs, seed, patch surface, estimator,
criterion, optimizer), validated as :class:`TrainConfig`."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replaykit.episodes.config import RunConfig
from replaykit.models.config import Seed


def _agentic() -> dict[str, object]:
    return {
        "kind": "agentic",
        "backend": {"kind": "openai", "model": "reference-proposer", "base_url": "builtin"},
    }


def _named(name: str) -> Callable[[], dict[str, object]]:
    return lambda: {"name": name}


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    epochs: int = Field(default=5, ge=1)
    seed: Seed = 0
    patch_surface: list[str] = Field(default_factory=lambda: ["harness.py"])
    #: the specs below name a registered factory (``kind`` / ``name``); the other keys are its
    #: parameters, checked against its signature when it is built (``core.registry``)
    estimator: dict[str, object] = Field(default_factory=_agentic)
    criterion: dict[str, object] = Field(default_factory=_named("strict_pareto"))
    optimizer: dict[str, object] = Field(default_factory=_named("greedy_monotonic"))


def train_config(config: RunConfig) -> TrainConfig:
    try:
        return TrainConfig.model_validate(config.train or {})
    except ValidationError as exc:
        raise config.config_error(exc, "train.") from None
