"""``GreedyMonotonic`` (the seed's): promote exactly what the criterion accepts.

Accept → fast-forward the baseline branch to the candidate (never any other move);
reject → keep the candidate under a ref.
"""

from __future__ import annotations

from replaykit.train.optim.base import ParameterBound, StepInput


class GreedyMonotonic(ParameterBound):
    name = "greedy_monotonic"

    def decide(self, step: StepInput) -> bool:
        return bool(step.measurable and step.verdict and step.verdict.accept)
