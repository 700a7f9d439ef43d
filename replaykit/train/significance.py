"""Significance arithmetic, exact where it can be; nothing here reads a store.

- **binomial tails** ``P(X >= k)`` / ``P(X <= k)`` for ``X ~ Binomial(n, p)``, summed exactly
  (integers until the last division when ``p = 1/2``).
- **exact McNemar test** on a paired binary outcome: of the ``b + c`` discordant pairs
  (``b`` solved by the baseline only, ``c`` by the candidate only), ``c ~ Binomial(b + c, 1/2)``
  under "no change". Two-sided ``p = min(1, 2 P(X <= min(b, c)))``; one-sided (the candidate
  better) ``p = P(X >= c)``. This is R's ``binom.test(c, b + c)`` / ``mcnemar.exact``.
- **Holm** (step-down, family-wise) and **Benjamini–Hochberg** (step-up, false discovery
  rate) adjusted p-values, as R's ``p.adjust`` gives them.
- **intra-task correlation** (one-way ANOVA estimator, unbalanced groups) and the **design
  effect** ``1 + (m - 1) rho`` of ``m`` seeds per task: seeds of one task are not independent.
- **minimum detectable effect** of a paired binary design with ``n`` pairs: the normal
  approximation of McNemar's power (Connor 1987, the variance term ``psi`` = the share of
  discordant pairs, inflated by the design effect) and never below what the exact test can
  reach at all: ``k`` discordant pairs all one way reject only when ``2 * 2**-k <= alpha``.
- **alpha spending with fallback** (Wiens 2003): a budget ``alpha`` split over ``E`` tests in
  order; a test that rejects passes its level on to the next. The chance that any rejection is
  false stays at most ``alpha`` (family-wise), which alpha-investing (Foster & Stine), whose
  rejections earn new wealth, does not promise: it bounds a false discovery rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import ceil, comb, log2, sqrt
from statistics import NormalDist

ALPHA = 0.05
POWER = 0.8


def _binom_sum(lo: int, hi: int, n: int, p: float) -> float:
    """``P(lo <= X <= hi)`` for ``X ~ Binomial(n, p)``: exact fractions at ``p = 1/2``."""
    lo, hi = max(lo, 0), min(hi, n)
    if lo > hi:
        return 0.0
    if p == 0.5:
        return float(Fraction(sum(comb(n, i) for i in range(lo, hi + 1)), 2**n))
    return min(1.0, sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(lo, hi + 1)))


def binom_sf(k: int, n: int, p: float = 0.5) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``."""
    return _binom_sum(k, n, n, p)


def binom_cdf(k: int, n: int, p: float = 0.5) -> float:
    """``P(X <= k)`` for ``X ~ Binomial(n, p)``."""
    return _binom_sum(0, k, n, p)


def mcnemar_exact(b: int, c: int) -> tuple[float, float]:
    """(two-sided p, one-sided p that the candidate is better): ``b`` pairs the baseline alone
    solved, ``c`` the candidate alone."""
    n = b + c
    if n == 0:
        return 1.0, 1.0
    two_sided = min(1.0, 2 * binom_cdf(min(b, c), n))
    return two_sided, binom_sf(c, n)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg step-up adjusted p-values (q-values), in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i], reverse=True)
    out = [0.0] * m
    running = 1.0
    for rank, i in enumerate(order):
        running = min(running, m * p_values[i] / (m - rank))
        out[i] = running
    return out


def z(q: float) -> float:
    """The standard normal quantile."""
    return NormalDist().inv_cdf(q)


def intra_task_correlation(groups: Sequence[Sequence[float]]) -> float:
    """The one-way ANOVA intraclass correlation of values grouped by task, clipped to [0, 1]
    (0 when it is not defined: fewer than two tasks, one value per task, no variance)."""
    groups = [list(g) for g in groups if g]
    k, n = len(groups), sum(len(g) for g in groups)
    if k < 2 or n <= k:
        return 0.0
    grand = sum(sum(g) for g in groups) / n
    between = sum(len(g) * (sum(g) / len(g) - grand) ** 2 for g in groups) / (k - 1)
    within = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in groups) / (n - k)
    m0 = (n - sum(len(g) ** 2 for g in groups) / n) / (k - 1)
    denominator = between + (m0 - 1) * within
    if denominator <= 0:
        return 0.0
    return min(1.0, max(0.0, (between - within) / denominator))


def design_effect(groups: Sequence[Sequence[float]]) -> tuple[float, float]:
    """(design effect ``1 + (m - 1) rho``, ``rho``) with ``m`` the mean number of values per task."""
    sizes = [len(g) for g in groups if g]
    if not sizes:
        return 1.0, 0.0
    rho = intra_task_correlation(groups)
    return 1 + (sum(sizes) / len(sizes) - 1) * rho, rho


def min_discordant(alpha: float = ALPHA) -> int:
    """The fewest discordant pairs, all one way, the two-sided exact McNemar test rejects at ``alpha``."""
    return max(1, ceil(log2(2 / alpha) - 1e-12))


def mde(n: int, discordance: float, deff: float = 1.0, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest difference in solve rate ``n`` paired task instances detect (two-sided
    ``alpha``, ``power``), the pairs' ``discordance`` share and design effect ``deff`` given;
    at least ``min_discordant(alpha) / n`` (the exact test's floor), at most 1."""
    if n <= 0:
        return 1.0
    normal = (z(1 - alpha / 2) + z(power)) * sqrt(max(discordance, 0.0) * max(deff, 1.0) / n)
    return min(1.0, max(normal, min_discordant(alpha) / n))


def fallback_levels(budget: float, tests: int, rejected: Sequence[bool]) -> list[float]:
    """The level of each test so far and of the next one: ``budget / tests`` each, plus the level
    of the test before when that one rejected (``rejected[i]``: test ``i`` rejected). Tests
    beyond ``tests`` get only what is passed on."""
    share = budget / tests if tests > 0 else 0.0
    levels: list[float] = []
    for i in range(len(rejected) + 1):
        own = share if i < tests else 0.0
        levels.append(own + (levels[-1] if i and rejected[i - 1] else 0.0))
    return levels


def rate_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval of a rate seen ``k`` times in ``n``: the
    probabilities under which ``k`` or more (``k`` or fewer) has a chance of at least
    ``(1 - level) / 2``, found by bisection on the binomial tails."""
    if n <= 0:
        return 0.0, 1.0
    tail = (1 - level) / 2

    def solve(at_least: bool) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            chance = binom_sf(k, n, mid) if at_least else binom_cdf(k, n, mid)
            if (chance < tail) == at_least:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    return (0.0 if k == 0 else solve(True)), (1.0 if k == n else solve(False))
