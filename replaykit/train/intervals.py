"""The intervals panels and transfer tables show, computed in one place.

- :func:`paired` — a candidate against a baseline on the same task instances (the verdicts'
  paired statistics, ``stats.paired``: a seeded task-clustered bootstrap interval and the exact
  McNemar test): "trained − untrained on this panel".
- :func:`gap` — two harness runs on *different* panels (train vs val, val vs test): their
  solve rates differ by ``upper − lower``; the interval draws each panel's tasks with
  replacement on its own (a task's seeds stay together), seeded, so it replays to the same
  numbers.
- :func:`rate` — one run's solve rate and its interval (``stats.rate_interval``).

Every caller goes through these three, so another statistic is swapped in here alone.
"""

from __future__ import annotations

import random
from typing import NotRequired, TypedDict

from replaykit.core.run_doc import RunDoc
from replaykit.train.stats import LEVEL, SAMPLES, rate_interval
from replaykit.train.stats import paired as paired_stats


class Movement(TypedDict):
    """``upper − lower`` (a mean difference of solve rates) with its interval."""

    diff: float
    low: float
    high: float
    units: int  # paired task instances (``paired``) or both panels' instances (``gap``)
    p: NotRequired[float]  # ``paired``: the exact McNemar test's two-sided p-value


class Rate(TypedDict):
    run_id: str
    solved: int
    total: int
    rate: float
    low: float
    high: float


def rate(run: RunDoc) -> Rate:
    """A run's solve rate (graded instances) and its seeded bootstrap interval."""
    graded = [e for e in run.episodes if not e.infra_failure]
    solved = sum(1 for e in graded if e.passed)
    lo, hi = rate_interval(run)
    return {
        "run_id": run.run_id,
        "solved": solved,
        "total": len(run.episodes),
        "rate": solved / len(graded) if graded else 0.0,
        "low": lo,
        "high": hi,
    }


def paired(baseline: RunDoc, candidate: RunDoc) -> Movement:
    """Candidate minus baseline over the task instances both measured."""
    found = paired_stats(baseline, candidate)
    low, high = found["interval"]
    return {
        "diff": found["difference"],
        "low": low,
        "high": high,
        "units": found["units"],
        "p": found["mcnemar_p"],
    }


def _groups(run: RunDoc) -> list[list[float]]:
    by_task: dict[str, list[float]] = {}
    for e in run.episodes:
        if not e.infra_failure:
            by_task.setdefault(e.task_id, []).append(float(e.passed))
    return [by_task[t] for t in sorted(by_task)]


def _mean(groups: list[list[float]]) -> float:
    count = sum(len(g) for g in groups)
    return sum(sum(g) for g in groups) / count if count else 0.0


def gap(lower: RunDoc, upper: RunDoc, samples: int = SAMPLES, seed: int = 0) -> Movement:
    """``upper``'s solve rate minus ``lower``'s, on two different panels (see the module doc)."""
    a, b = _groups(lower), _groups(upper)
    diff = _mean(b) - _mean(a)
    if not a or not b:
        return {"diff": diff, "low": diff, "high": diff, "units": sum(map(len, a + b))}
    rng = random.Random(seed)
    draws = []
    for _ in range(samples):
        pa = [a[int(rng.random() * len(a))] for _ in a]
        pb = [b[int(rng.random() * len(b))] for _ in b]
        draws.append(_mean(pb) - _mean(pa))
    draws.sort()
    lo = draws[max(0, round((1 - LEVEL) / 2 * samples) - 1)]
    hi = draws[min(samples - 1, round((1 + LEVEL) / 2 * samples) - 1)]
    return {"diff": diff, "low": lo, "high": hi, "units": sum(map(len, a + b))}


def signed(m: Movement) -> str:
    """``+0.25 [+0.06, +0.44]``."""
    return f"{m['diff']:+.2f} [{m['low']:+.2f}, {m['high']:+.2f}]"
