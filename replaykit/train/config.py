"""The ``train:`` section of a run config (epochs, seed, patch surface, estimator,
criterion, optimizer), validated as :class:`TrainConfig`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replaykit.episodes.config import RunConfig, Seed


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    epochs: int = Field(default=5, ge=1)
    seed: Seed = 0
    patch_surface: list[str] = Field(default_factory=lambda: ["harness.py"])
    estimator: dict[str, Any] = Field(
        default_factory=lambda: {
            "kind": "agentic",
            "backend": {"kind": "openai", "model": "reference-proposer", "base_url": "builtin"},
        }
    )
    criterion: dict[str, Any] = Field(default_factory=lambda: {"name": "strict_pareto"})
    optimizer: dict[str, Any] = Field(default_factory=lambda: {"name": "greedy_monotonic"})


def train_config(config: RunConfig) -> TrainConfig:
    try:
        return TrainConfig.model_validate(config.train or {})
    except ValidationError as exc:
        raise config.config_error(exc, "train.") from None
