"""``train.error_budget``: one α spent across a training's epochs.

Each judged epoch is a test of "this change does nothing"; a training of E epochs at α each
accepts some change that does nothing far more often than α. With ``error_budget: α`` each of
the planned ``train.epochs`` gets ``α / E``, and an epoch whose verdict accepted (or that was
skipped: no test spent its share) passes its whole level on to the next epoch: the fallback
procedure (``significance.fallback_levels``). The chance that any change the training accepts
does nothing stays at most α, the claim "this training's accepted changes are real" holds with
probability at least 1 − α. (Alpha-investing proper, whose rejections earn more than they
spend, bounds a false discovery rate instead, which is not that claim.) Epochs beyond the planned
ones get only what is passed on.

The level is the criterion's (``PairedTest.at_level``), so each verdict names the level it was
judged at and recomputes from its runs; the walk over a recorded training (``walk.py``)
derives the same levels from the same decisions, so a verdict at a forged level is caught.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from replaykit.core.training_doc import TrainingDoc
from replaykit.train.significance import fallback_levels
from replaykit.train.verdicts import Criterion, Verdict


@runtime_checkable
class Levelled(Protocol):
    """A criterion that tests at a level an error budget can set (``paired_test``)."""

    def at_level(self, level: float) -> Criterion: ...


def epoch_level(budget: float, epochs: int, earlier: Sequence[str]) -> float:
    """The level of the epoch after ``earlier`` (each ``accepted``, ``rejected`` or ``skipped``:
    what the criterion decided, before any optimizer)."""
    return fallback_levels(budget, epochs, [d != "rejected" for d in earlier])[-1]


def verdict_decision(verdict: Verdict | Mapping[str, object] | None, skipped: object = None) -> str:
    """``accepted`` / ``rejected`` as the criterion decided; ``skipped`` without a verdict."""
    if skipped or verdict is None:
        return "skipped"
    accept = verdict.accept if isinstance(verdict, Verdict) else verdict.get("accept")
    return "accepted" if accept else "rejected"


def epoch_criterion(
    criterion: Criterion, budget: float | None, epochs: int, earlier: Sequence[str]
) -> Criterion:
    """``criterion`` at its share of the budget for the epoch after ``earlier`` (unchanged
    without a budget, or for a criterion that takes no level)."""
    if budget is None or not isinstance(criterion, Levelled):
        return criterion
    return criterion.at_level(epoch_level(budget, epochs, earlier))


def training_budget(doc: TrainingDoc) -> tuple[float | None, int]:
    """A recorded training's (``train.error_budget``, planned ``train.epochs``) from its config."""
    config = doc.config
    train = config.get("train") if isinstance(config, dict) else None
    if not isinstance(train, dict) or train.get("error_budget") is None:
        return None, 0
    budget, epochs = train.get("error_budget"), train.get("epochs", 5)
    return float(budget) if isinstance(budget, int | float) else None, int(epochs) if isinstance(
        epochs, int
    ) else 5
