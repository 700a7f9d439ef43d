"""A training's identity, as pure functions: its spec, the spec's digest, its id.

A training id is a hash of its spec (config digest, model, panel, estimator, criterion,
optimizer, seed, patch surface; format 2 adds the format, the held-out panels, the smoke and
test gates and ``proposer_visible``) and its initial baseline SHA. A part added since the first
trainings is absent when unset (``certify``, ``error_budget``) or belongs to format 2, so the
ids recorded before stay what they were. The Trainer (``trainer.py``) finds a recorded training
by its spec's digest (resuming it when the HEAD is on its chain), else names a new one.
"""

from __future__ import annotations

from replaykit.cassette.keys import ModelId
from replaykit.core.determinism import digest_of
from replaykit.episodes.config import RunConfig
from replaykit.train.certification import EVERY_EPOCH
from replaykit.train.config import TrainConfig
from replaykit.train.estimators import Estimator
from replaykit.train.optimizers import Optimizer
from replaykit.train.panels import TRAIN, configured
from replaykit.train.verdicts import Criterion


def spec_digest(
    config: RunConfig,
    train_cfg: TrainConfig,
    model: ModelId,
    estimator: Estimator,
    criterion: Criterion,
    optimizer: Optimizer,
    format: int,
) -> str:
    """What a training's id hashes besides its initial baseline (stored as its ``spec_digest``)."""
    return digest_of(
        {
            **spec(config, train_cfg, model, estimator, criterion, optimizer),
            **spec_format_2(config, train_cfg, format),
        }
    )


def spec(
    config: RunConfig,
    train_cfg: TrainConfig,
    model: ModelId,
    estimator: Estimator,
    criterion: Criterion,
    optimizer: Optimizer,
) -> dict[str, object]:
    """The spec every training has (format 1's whole identity)."""
    return {
        "config": config.digest(),
        "name": config.name,
        "model": model.__dict__,
        "panel": config.panel.model_dump(),
        "estimator": estimator.identity(),
        "criterion": [criterion.name, criterion.params()],
        "optimizer": [optimizer.name, optimizer.params()] if optimizer.params() else optimizer.name,
        "seed": train_cfg.seed,
        "surface": train_cfg.patch_surface,
        **({"certify": EVERY_EPOCH} if train_cfg.certify == EVERY_EPOCH else {}),  # absent: recorded ids stay
        **({"error_budget": b} if (b := train_cfg.error_budget) is not None else {}),
    }


def spec_format_2(config: RunConfig, train_cfg: TrainConfig, format: int) -> dict[str, object]:
    """What a format-2 training adds to its identity (nothing for format 1: recorded ids stay)."""
    if format < 2:
        return {}
    panels = {p: getattr(train_cfg.panels, p) for p in configured(config) if p != TRAIN}
    return {
        "format": format,
        **({"panels": panels} if panels else {}),
        "gates": {
            "smoke": [train_cfg.smoke.tasks, train_cfg.smoke.seeds],
            "tests": train_cfg.candidate_tests,
        },
        "visible": train_cfg.proposer_visible,
    }


def training_id(spec_digest: str, initial_sha: str) -> str:
    """A new training's id: its spec's digest with its initial baseline SHA."""
    return digest_of([spec_digest, initial_sha])[:16]
