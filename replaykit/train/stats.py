"""Replicate statistics: how much of a run, a verdict or a compare cell is noise.

Everything here is a function of recorded episodes (and, for re-executions, stored
certificates), with a fixed RNG seed, so it replays to the same numbers.

- **pass@k / pass^k** per task over its n seeds (c solved): pass@k = 1 − C(n−c, k)/C(n, k)
  (at least one of k attempts solves it), pass^k = C(c, k)/C(n, k) (all k do); a run's value
  is the mean over its tasks, for k = 1 … the fewest seeds any task has.
- **seed flip rate**: of every two seeds of the same task (same harness, same model), the
  share whose outcomes differ — how often a rerun of an unchanged agent flips.
- **re-execution flip rate**: of the run's certified tasks, the share certify found
  ``forked`` (any observation or the grade differed when the actions ran again).
- **paired bootstrap interval** of the candidate-minus-baseline score (solved, or reward)
  over the task instances both runs measured: tasks drawn with replacement (a task's
  seeds stay together), ``SAMPLES`` times, from ``random.Random(seed)``; the 2.5th and
  97.5th percentiles.
- **noise floor** of a comparison: the larger of the two runs' pooled seed flip rate and
  the interval's half-width on the side of 0. A margin whose size is at most the floor is
  ``within_noise``: reruns of the same agent flip that much, or the interval holds 0.
  Forked tasks are excluded from verdicts, so they move no margin; their rate is shown.
- **paired comparison** (``paired``) of a verdict's two runs over the same task instances: the
  difference in solve rate and in mean reward, each with its task-clustered bootstrap interval
  (above), the exact McNemar test on the discordant instances, and the minimum detectable
  effect at this panel's size (two-sided α 0.05, power 0.8, the design effect of the seeds'
  clustering, the discordant share taken as at least the runs' pooled seed flip rate: two
  reruns of an unchanged harness disagree that often); the arithmetic is ``significance.py``'s.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from math import comb
from typing import TYPE_CHECKING, Literal, TypedDict, TypeVar

if TYPE_CHECKING:
    from replaykit.cassette.backend import RunStore
    from replaykit.core.records import JSON
    from replaykit.core.run_doc import EpisodeSummary, RunDoc
    from replaykit.core.run_rows import Replicate, Replicates

R = TypeVar("R", bound="Replicate")

SAMPLES = 1000
LEVEL = 0.95
Score = Literal["solved", "reward"]


class TaskStats(TypedDict):
    task_id: str
    seeds: int
    solved: int
    pass_at_k: dict[str, float]  # "1", "2", … → value
    pass_hat_k: dict[str, float]
    flip_rate: float | None  # None with one seed


class RunSummaryStats(TypedDict):
    """A run's replicate statistics without the per-task rows (what ``runs`` lists)."""

    run_id: str
    units: int
    seeds: int  # the fewest seeds a task has
    pass_at_k: dict[str, float]
    pass_hat_k: dict[str, float]
    seed_flip_rate: float | None
    seed_pairs: int
    reexec_flip_rate: float | None  # None: no task certified
    reexec_certified: int
    reexec_forked: int


class RunStats(RunSummaryStats):
    """A run's replicate statistics (``run_stats``)."""

    tasks: list[TaskStats]


class Interval(TypedDict):
    """A seeded paired bootstrap interval of the candidate-minus-baseline mean score."""

    score: str
    mean_diff: float
    low: float
    high: float
    level: float
    samples: int
    seed: int
    units: int


class Noise(TypedDict):
    """A comparison's noise: its margin, the interval, the floor and whether it is within it."""

    margin: float
    noise_floor: float
    within_noise: bool
    seed_flip_rate: float | None
    interval: Interval


class PairedReward(TypedDict):
    difference: float  # mean candidate-minus-baseline reward
    interval: list[float]  # [low, high], task-clustered bootstrap


class Paired(TypedDict):
    """Two runs compared over the task instances both measured (``paired``): candidate minus
    baseline in solve rate (``difference``, ``interval``, the tests, ``mde``) and in reward."""

    units: int  # task instances both measured (infra and excluded tasks left out)
    tasks: int
    difference: float  # solve rate, candidate minus baseline
    interval: list[float]  # [low, high]: LEVEL, tasks drawn with replacement (their seeds together)
    level: float
    samples: int
    seed: int
    discordant: list[int]  # [solved by the baseline only, by the candidate only]
    mcnemar_p: float  # exact, two-sided
    mcnemar_p_better: float  # exact, one-sided: the candidate solves more
    mde: float  # the smallest solve-rate difference this panel detects (alpha, power below)
    alpha: float
    power: float
    design_effect: float  # 1 + (seeds per task - 1) * intra_task_correlation
    intra_task_correlation: float
    detectable: bool  # |difference| >= mde
    reward: PairedReward


class CompareNoise(TypedDict):
    """One compare cell's noise: its run's statistics, its solve rate's interval and, against
    the first harness's cell of the same model, the paired comparison."""

    run_id: str
    stats: RunStats
    solve_rate_interval: list[float]  # [low, high]
    against: str | None  # the run it is compared with
    noise: Noise | None


def _score(e: EpisodeSummary, score: Score) -> float:
    return float(e.passed) if score == "solved" else float(e.reward or 0.0)


def _by_task(episodes: Iterable[R]) -> dict[str, list[R]]:
    out: dict[str, list[R]] = {}
    for e in episodes:
        out.setdefault(e.task_id, []).append(e)
    return dict(sorted(out.items()))


def _graded(run: Replicates) -> dict[str, list[Replicate]]:
    """A run's graded episodes by task (an infrastructure failure is no replicate)."""
    return _by_task(e for e in run.episodes if not e.infra_failure)


def task_stats(task_id: str, episodes: Sequence[Replicate]) -> TaskStats:
    n, c = len(episodes), sum(1 for e in episodes if e.passed)
    pairs = comb(n, 2)
    return {
        "task_id": task_id,
        "seeds": n,
        "solved": c,
        "pass_at_k": {str(k): 1 - comb(n - c, k) / comb(n, k) for k in range(1, n + 1)},
        "pass_hat_k": {str(k): comb(c, k) / comb(n, k) for k in range(1, n + 1)},
        "flip_rate": c * (n - c) / pairs if pairs else None,  # pairs with one solved, one not
    }


def run_stats(run: Replicates, certificates: Mapping[str, str] | None = None) -> RunStats:
    """``certificates``: task id → ``deterministic`` | ``forked`` for the run's certified tasks."""
    tasks = [task_stats(t, eps) for t, eps in _graded(run).items()]
    k_max = min((t["seeds"] for t in tasks), default=0)
    ks = [str(k) for k in range(1, k_max + 1)]
    pairs = sum(comb(t["seeds"], 2) for t in tasks)
    flips = sum(t["solved"] * (t["seeds"] - t["solved"]) for t in tasks)
    certs = dict(certificates or {})
    forked = sum(1 for s in certs.values() if s == "forked")
    return {
        "run_id": run.run_id,
        "units": sum(t["seeds"] for t in tasks),
        "seeds": k_max,
        "pass_at_k": {k: sum(t["pass_at_k"][k] for t in tasks) / len(tasks) for k in ks},
        "pass_hat_k": {k: sum(t["pass_hat_k"][k] for t in tasks) / len(tasks) for k in ks},
        "seed_flip_rate": flips / pairs if pairs else None,
        "seed_pairs": pairs,
        "reexec_flip_rate": forked / len(certs) if certs else None,
        "reexec_certified": len(certs),
        "reexec_forked": forked,
        "tasks": tasks,
    }


def _paired(
    baseline: RunDoc, candidate: RunDoc, exclude: Mapping[str, str] | None, score: Score
) -> dict[str, list[float]]:
    """Task → the candidate-minus-baseline score of each instance both measured (infra and
    excluded tasks left out)."""
    b = {e.unit: e for e in baseline.episodes}
    out: dict[str, list[float]] = {}
    for e in candidate.episodes:
        other = b.get(e.unit)
        if other is None or e.infra_failure or other.infra_failure or e.task_id in (exclude or {}):
            continue
        out.setdefault(e.task_id, []).append(_score(e, score) - _score(other, score))
    return dict(sorted(out.items()))


def _percentiles(values: list[float]) -> tuple[float, float]:
    """The (1 − LEVEL)/2 and (1 + LEVEL)/2 nearest-rank percentiles."""
    ordered = sorted(values)
    n = len(ordered)
    lo = ordered[max(0, round((1 - LEVEL) / 2 * n) - 1)]
    hi = ordered[min(n - 1, round((1 + LEVEL) / 2 * n) - 1)]
    return lo, hi


def _resampled_means(groups: list[list[float]], samples: int, seed: int) -> list[float]:
    """Means over ``samples`` draws of len(groups) groups with replacement (seeded)."""
    rng = random.Random(seed)
    out = []
    for _ in range(samples):
        picked = [groups[int(rng.random() * len(groups))] for _ in groups]
        total, count = sum(sum(g) for g in picked), sum(len(g) for g in picked)
        out.append(total / count if count else 0.0)
    return out


def paired_interval(
    baseline: RunDoc,
    candidate: RunDoc,
    exclude: Mapping[str, str] | None = None,
    score: Score = "solved",
    samples: int = SAMPLES,
    seed: int = 0,
) -> Interval:
    groups = list(_paired(baseline, candidate, exclude, score).values())
    units = sum(len(g) for g in groups)
    mean = sum(sum(g) for g in groups) / units if units else 0.0
    lo, hi = _percentiles(_resampled_means(groups, samples, seed)) if groups else (0.0, 0.0)
    return {
        "score": score,
        "mean_diff": mean,
        "low": lo,
        "high": hi,
        "level": LEVEL,
        "samples": samples,
        "seed": seed,
        "units": units,
    }


def paired(
    baseline: RunDoc,
    candidate: RunDoc,
    exclude: Mapping[str, str] | None = None,
    seed: int = 0,
    samples: int = SAMPLES,
) -> Paired:
    """The paired comparison of ``candidate`` against ``baseline`` (see the module doc)."""
    from replaykit.train.significance import (  # fractions, statistics: loaded for a comparison
        ALPHA,
        POWER,
        design_effect,
        mcnemar_exact,
        mde,
    )

    groups = list(_paired(baseline, candidate, exclude, "solved").values())
    diffs = [d for g in groups for d in g]
    b, c = sum(1 for d in diffs if d < 0), sum(1 for d in diffs if d > 0)
    two_sided, better = mcnemar_exact(b, c)
    deff, rho = design_effect(groups)
    solved = paired_interval(baseline, candidate, exclude, "solved", samples, seed)
    reward = paired_interval(baseline, candidate, exclude, "reward", samples, seed)
    units = len(diffs)
    # the discordance expected with no change is how often reruns flip (either run's seeds)
    expected = max((b + c) / units if units else 0.0, pooled_flip_rate(baseline, candidate) or 0.0)
    floor = mde(units, expected, deff)
    return {
        "units": units,
        "tasks": len(groups),
        "difference": solved["mean_diff"],
        "interval": [solved["low"], solved["high"]],
        "level": LEVEL,
        "samples": samples,
        "seed": seed,
        "discordant": [b, c],
        "mcnemar_p": two_sided,
        "mcnemar_p_better": better,
        "mde": floor,
        "alpha": ALPHA,
        "power": POWER,
        "design_effect": deff,
        "intra_task_correlation": rho,
        "detectable": abs(solved["mean_diff"]) >= floor - 1e-12 and units > 0,
        "reward": {"difference": reward["mean_diff"], "interval": [reward["low"], reward["high"]]},
    }


def pooled_flip_rate(*runs: RunDoc) -> float | None:
    """The seed flip rate over every run's same-task seed pairs together."""
    stats = [run_stats(run) for run in runs]
    pairs = sum(s["seed_pairs"] for s in stats)
    flips = sum((s["seed_flip_rate"] or 0.0) * s["seed_pairs"] for s in stats)
    return flips / pairs if pairs else None


def noise(
    baseline: RunDoc,
    candidate: RunDoc,
    exclude: Mapping[str, str] | None = None,
    score: Score = "solved",
    seed: int = 0,
) -> Noise:
    """The comparison's margin (mean candidate-minus-baseline score), its noise floor, and
    whether the margin is within it (see the module doc)."""
    interval = paired_interval(baseline, candidate, exclude, score, seed=seed)
    margin = interval["mean_diff"]
    flips = pooled_flip_rate(baseline, candidate)
    toward_zero = margin - interval["low"] if margin >= 0 else interval["high"] - margin
    floor = max(flips or 0.0, toward_zero)
    return {
        "margin": margin,
        "noise_floor": floor,
        "within_noise": abs(margin) <= floor + 1e-12,
        "seed_flip_rate": flips,
        "interval": interval,
    }


def noise_json(found: Noise) -> dict[str, JSON]:
    """A comparison's noise as a verdict's metrics hold it."""
    interval: dict[str, JSON] = {
        k: v for k, v in found["interval"].items() if isinstance(v, str | int | float)
    }
    return {
        "margin": found["margin"],
        "noise_floor": found["noise_floor"],
        "within_noise": found["within_noise"],
        "seed_flip_rate": found["seed_flip_rate"],
        "interval": interval,
    }


def rate_interval(run: RunDoc, samples: int = SAMPLES, seed: int = 0) -> tuple[float, float]:
    """A seeded bootstrap interval of a run's solve rate (tasks drawn with replacement)."""
    groups = [[float(e.passed) for e in eps] for eps in _graded(run).values()]
    if not groups:
        return 0.0, 0.0
    return _percentiles(_resampled_means(groups, samples, seed))


def stored_run_stats(store: RunStore, run: Replicates) -> RunStats:
    """A stored run's statistics, its re-execution flip rate from the certificates stored for
    its very episodes (``episodes.certify``: a look-up, nothing runs)."""
    from replaykit.episodes.certificate_lookup import task_certificates

    certs = {t: status for t, (status, _) in task_certificates(store, run).items()}
    return run_stats(run, certs)
