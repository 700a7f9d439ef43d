"""Criteria: the verdict on (candidate run, baseline run) → Verdict (loss, accept, movement).

A *unit* is one task instance: a (task, seed) pair, written ``task#seed``.
Registered by name so configs (``train.criterion.name``) and ``replaykit audit
--criterion`` can select them: ``strict_pareto`` and ``mean_reward`` here, ``paired_test``
in ``paired_test.py``. Add one with one file: a class with ``name``, ``params()`` and
``__call__(candidate, baseline, exclude) -> Verdict`` (both runs are ``RunDoc`` records:
``verdicts.outcomes(run)`` pairs their episodes by unit), then ``register_criterion(name,
cls)`` or an entry point in the ``replaykit.criteria`` group.
"""

from __future__ import annotations

from math import comb
from typing import Any, Callable

from replaykit.core.errors import ConfigError
from replaykit.core.records import JSON
from replaykit.core.registry import FactoryRegistry
from replaykit.core.run_doc import RunDoc
from replaykit.train.paired_test import PairedTest
from replaykit.train.stats import Score, noise, noise_json
from replaykit.train.verdicts import Criterion, Outcome, Verdict, movement, pair_runs, with_exclusions


def _min_margin(value: str | None) -> str | None:
    if value not in (None, "noise"):
        raise ConfigError(
            f"min_margin {value!r}: the one margin is 'noise' (refuse a win within the noise floor); leave it out for none"
        )
    return value


def _with_margin(params: dict[str, JSON], min_margin: str | None) -> dict[str, JSON]:
    """A criterion's parameters, ``min_margin`` only when set (verdicts without it keep their ids)."""
    return {**params, "min_margin": min_margin} if min_margin else params


def _noise_floor(verdict: Verdict, candidate: RunDoc, baseline: RunDoc, score: Score) -> Verdict:
    """``min_margin: noise``: an acceptance whose margin is within the noise floor is refused
    (``train/stats.py``); the verdict's metrics carry the floor either way."""
    found = noise(baseline, candidate, verdict.excluded, score)
    verdict.metrics["noise"] = noise_json(found)
    if verdict.accept and found["within_noise"]:
        verdict.accept = False
        verdict.reason += (
            f"; refused by min_margin noise: margin {found['margin']:+.3f} is within the noise floor "
            f"{found['noise_floor']:.3f}"
        )
    return verdict


class StrictPareto:
    """Never accept a regression; otherwise solve strictly more, or tie-break on secondary metrics.

    Infrastructure failures are bracketed: decided once counting them for the
    candidate (best case) and once against it (worst case); a verdict that flips
    between the two is unmeasurable and rejected.
    """

    name = "strict_pareto"

    def __init__(
        self,
        secondary_metrics: tuple[str, ...] | list[str] = ("steps", "tokens"),
        min_margin: str | None = None,
    ) -> None:
        unknown = set(secondary_metrics) - {"steps", "tokens"}
        if unknown:
            raise ConfigError(f"unknown secondary metric(s) {sorted(unknown)}; use steps and/or tokens")
        self.secondary_metrics = tuple(secondary_metrics)
        self.min_margin = _min_margin(min_margin)

    def params(self) -> dict[str, JSON]:
        return _with_margin({"secondary_metrics": list(self.secondary_metrics)}, self.min_margin)

    def _decide(
        self, b: dict[str, Outcome], c: dict[str, Outcome], units: list[str], case: str
    ) -> tuple[bool, str]:
        solved_b = {u for u in units if b[u].passed or (b[u].infra and case == "worst")}
        solved_c = {u for u in units if c[u].passed or (c[u].infra and case == "best")}
        regressions = sorted(solved_b - solved_c)
        if regressions:
            return (
                False,
                f"regression on {len(regressions)} task instance(s) the baseline solved: {', '.join(regressions)}",
            )
        new = sorted(solved_c - solved_b)
        if new:
            return True, f"solves {len(new)} more task instance(s) with no regression: {', '.join(new)}"
        for metric in self.secondary_metrics:
            before = sum(getattr(b[u], metric) for u in units)
            after = sum(getattr(c[u], metric) for u in units)
            if after < before:
                return True, f"same solved set; tie broken by fewer {metric} ({before} → {after})"
            if after > before:
                return False, f"same solved set; tie-break rejects: more {metric} ({before} → {after})"
        return False, "exact tie: same solved set and secondary metrics; no improvement"

    def __call__(self, candidate: RunDoc, baseline: RunDoc, exclude: dict[str, str] | None = None) -> Verdict:
        b, c, units, excluded = pair_runs(candidate, baseline, exclude)
        regressions, new = movement(b, c, units)
        infra = [u for u in units if b[u].infra or c[u].infra]
        best = self._decide(b, c, units, "best")
        worst = self._decide(b, c, units, "worst")
        if infra and best[0] != worst[0]:
            accept, reason = (
                False,
                f"unmeasurable: {len(infra)} infrastructure failure(s) ({', '.join(infra)}) flip the verdict between best and worst case",
            )
        else:
            accept, reason = worst
        solved_b = sum(b[u].passed for u in units)
        solved_c = sum(c[u].passed for u in units)
        verdict = Verdict(
            self.name,
            self.params(),
            accept,
            (solved_b - solved_c) / max(len(units), 1),
            with_exclusions(reason, excluded),
            regressions,
            new,
            excluded,
            {
                "units": len(units),
                "solved_baseline": solved_b,
                "solved_candidate": solved_c,
                "infra": infra,
                "steps": [sum(b[u].steps for u in units), sum(c[u].steps for u in units)],
                "tokens": [sum(b[u].tokens for u in units), sum(c[u].tokens for u in units)],
            },
        )
        return _noise_floor(verdict, candidate, baseline, "solved") if self.min_margin else verdict


class MeanReward:
    """Accept when the mean paired reward difference is positive and a one-sided
    sign test on the per-instance differences has p ≤ alpha. Infra failures are dropped."""

    name = "mean_reward"

    def __init__(self, alpha: float = 0.1, min_margin: str | None = None) -> None:
        self.alpha = float(alpha)
        self.min_margin = _min_margin(min_margin)

    def params(self) -> dict[str, JSON]:
        return _with_margin({"alpha": self.alpha}, self.min_margin)

    def __call__(self, candidate: RunDoc, baseline: RunDoc, exclude: dict[str, str] | None = None) -> Verdict:
        b, c, units, excluded = pair_runs(candidate, baseline, exclude)
        regressions, new = movement(b, c, units)
        kept = [u for u in units if not (b[u].infra or c[u].infra)]
        diffs = [c[u].reward - b[u].reward for u in kept]
        mean = sum(diffs) / len(diffs) if diffs else 0.0
        wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
        n = wins + losses
        p = sum(comb(n, k) for k in range(wins, n + 1)) / 2**n if n else 1.0
        accept = mean > 0 and p <= self.alpha
        reason = (
            f"mean reward {mean:+.3f} over {len(kept)} paired instance(s); sign test {wins} up / {losses} down, "
            f"p={p:.3f} {'≤' if p <= self.alpha else '>'} alpha={self.alpha}"
        )
        verdict = Verdict(
            self.name,
            self.params(),
            accept,
            -mean,
            with_exclusions(reason, excluded),
            regressions,
            new,
            excluded,
            {"units": len(kept), "mean_diff": mean, "wins": wins, "losses": losses, "p_value": p},
        )
        return _noise_floor(verdict, candidate, baseline, "reward") if self.min_margin else verdict


CRITERIA: FactoryRegistry[Criterion] = FactoryRegistry("criterion", "replaykit.criteria")


def register_criterion(name: str, factory: Callable[..., Criterion]) -> None:
    CRITERIA.register(name, factory)


register_criterion(StrictPareto.name, StrictPareto)
register_criterion(MeanReward.name, MeanReward)
register_criterion(PairedTest.name, PairedTest)


def make_criterion(name: str, **params: Any) -> Criterion:
    """The criterion ``name`` with ``params`` (validated against its signature: ``FactoryRegistry.create``)."""
    criterion: Criterion = CRITERIA.create(name, **params)
    return criterion
