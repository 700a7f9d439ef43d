"""``MarginGreedy``: promote only an acceptance that clears an improvement margin
and, optionally, a significance level over the paired task instances (task × seed).

- ``margin``: the candidate must solve at least this many more task instances than
  its baseline (new solves minus regressions);
- ``alpha``: if set, a one-sided exact sign test over the instances that moved
  (new solves vs regressions) must give p ≤ alpha.

The criterion must accept too: this optimizer only ever promotes *less* than greedy.
"""

from __future__ import annotations

from math import comb

from replaykit.core.errors import ConfigError
from replaykit.core.records import JSON
from replaykit.train.optim.base import ParameterBound, StepInput


def sign_test(wins: int, losses: int) -> float:
    """One-sided exact sign test: P(at least ``wins`` ups among wins+losses fair coin flips)."""
    n = wins + losses
    return sum(comb(n, k) for k in range(wins, n + 1)) / 2**n if n else 1.0


class MarginGreedy(ParameterBound):
    name = "margin_greedy"

    def __init__(self, margin: int = 1, alpha: float | None = None) -> None:
        super().__init__()
        if int(margin) < 0:
            raise ConfigError(f"optimizer margin_greedy: margin must be ≥ 0, got {margin}")
        if alpha is not None and not 0 < float(alpha) <= 1:
            raise ConfigError(f"optimizer margin_greedy: alpha must be in (0, 1], got {alpha}")
        self.margin = int(margin)
        self.alpha = None if alpha is None else float(alpha)

    def params(self) -> dict[str, JSON]:
        return {"margin": self.margin, "alpha": self.alpha}

    def decide(self, step: StepInput) -> bool:
        verdict = step.verdict
        if verdict is None or not step.measurable or not verdict.accept:
            return False
        wins, losses = len(verdict.new_solves), len(verdict.regressions)
        if wins - losses < self.margin:
            return False
        return self.alpha is None or sign_test(wins, losses) <= self.alpha
