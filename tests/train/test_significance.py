"""The significance arithmetic (train/significance.py) against reference values: R's
binom.test / mcnemar.exact and p.adjust, Benjamini & Hochberg's own example, a hand-computed
ANOVA intraclass correlation, and McNemar's power simulated at the minimum detectable effect;
then ``stats.paired`` on runs."""

from __future__ import annotations

import random

import pytest

from replaykit.testing import run_doc
from replaykit.train.significance import (
    benjamini_hochberg,
    binom_cdf,
    binom_sf,
    design_effect,
    fallback_levels,
    holm,
    intra_task_correlation,
    mcnemar_exact,
    mde,
    min_discordant,
    rate_interval,
)
from replaykit.train.stats import paired

#: Benjamini & Hochberg (1995), section 4: fifteen p-values; at q = 0.05 the first four are rejected
BH_1995 = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459]
BH_1995 += [0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000]


def test_binomial_tails_are_exact() -> None:
    assert binom_cdf(7, 20) == 137980 / 2**20  # sum of C(20, 0..7)
    assert binom_sf(10, 12) == 79 / 4096  # C(12,10) + C(12,11) + C(12,12)
    assert binom_sf(0, 5) == 1.0 and binom_sf(6, 5) == 0.0 and binom_cdf(5, 5) == 1.0
    assert binom_sf(2, 3, 0.2) == pytest.approx(3 * 0.04 * 0.8 + 0.008)


@pytest.mark.parametrize(
    ("b", "c", "two_sided", "greater"),
    [
        (13, 7, 0.2632, 0.9423),  # R: binom.test(7, 20)$p.value = 0.2632; alternative = "greater" 0.9423
        (2, 10, 0.03857, 0.01929),  # R: binom.test(10, 12): 0.03857; "greater": 0.01929
        (0, 5, 0.0625, 0.03125),  # five discordant pairs all one way: not significant two-sided
        (0, 6, 0.03125, 0.015625),
        (3, 3, 1.0, 0.65625),
        (0, 0, 1.0, 1.0),  # no discordant pair: no evidence either way
    ],
)
def test_exact_mcnemar_matches_r(b: int, c: int, two_sided: float, greater: float) -> None:
    p2, p1 = mcnemar_exact(b, c)
    assert p2 == pytest.approx(two_sided, abs=5e-5) and p1 == pytest.approx(greater, abs=5e-5)


def test_holm_and_benjamini_hochberg_match_p_adjust() -> None:
    ps = [0.01, 0.02, 0.03, 0.04, 0.05]  # R: p.adjust(ps, "holm"), p.adjust(ps, "BH")
    assert holm(ps) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    assert benjamini_hochberg(ps) == pytest.approx([0.05] * 5)
    assert holm([0.04, 0.01, 0.5]) == pytest.approx([0.08, 0.03, 0.5])  # in the order given
    bh = benjamini_hochberg(BH_1995)
    assert bh[:5] == pytest.approx([0.0015, 0.003, 0.0095, 0.035625, 0.0603])
    assert bh[5:10] == pytest.approx([0.0638571, 0.0638571, 0.0645, 0.0765, 0.486], abs=1e-6)
    assert [q <= 0.05 for q in bh].count(True) == 4  # the paper rejects four
    assert [p for p in holm(BH_1995) if p <= 0.05] == pytest.approx([0.0015, 0.0056, 0.0247])
    assert holm([]) == [] and benjamini_hochberg([]) == []


def test_intra_task_correlation_is_the_one_way_anova_estimator() -> None:
    # MSB = 13.5, MSW = 1, m0 = 3: (13.5 - 1) / (13.5 + 2 * 1)
    assert intra_task_correlation([[1, 2, 3], [4, 5, 6]]) == pytest.approx(12.5 / 15.5)
    assert intra_task_correlation([[1, 1], [0, 0], [1, 1]]) == 1.0  # seeds of a task always agree
    assert intra_task_correlation([[1, 0], [1, 0], [0, 1]]) == 0.0  # clipped: within > between
    assert intra_task_correlation([[0, 0], [0, 0]]) == 0.0 and intra_task_correlation([[1]]) == 0.0
    assert design_effect([[1, 1], [0, 0], [1, 1]]) == (2.0, 1.0)  # two seeds that move together count once


def test_the_exact_floor_and_the_mde() -> None:
    assert min_discordant(0.05) == 6 and min_discordant(0.0625) == 5 and min_discordant(0.01) == 8
    assert mde(16, 0.0) == 6 / 16  # nothing discordant: only the exact test's floor is left
    assert mde(16, 0.25) == 6 / 16  # the normal approximation (0.350) is below the floor here
    assert mde(64, 0.25) == pytest.approx((1.959964 + 0.841621) * (0.25 / 64) ** 0.5, abs=1e-5)
    assert mde(64, 0.25, deff=2.0) == pytest.approx(mde(64, 0.25) * 2**0.5)
    assert mde(0, 0.5) == 1.0 and mde(4, 1.0) == 1.0


def test_mcnemar_reaches_the_power_it_promises_at_the_mde() -> None:
    """At the mde (n = 400 pairs, 30 % discordant) the two-sided exact test rejects about 80 %
    of the time (simulated; the normal approximation errs on the safe side)."""
    n, psi = 400, 0.3
    delta = mde(n, psi)
    rng = random.Random(7)
    rejected = 0
    for _ in range(1000):
        b = c = 0
        for _ in range(n):
            u = rng.random()
            if u < psi:  # discordant: the candidate's with probability (1 + delta / psi) / 2
                if rng.random() < (1 + delta / psi) / 2:
                    c += 1
                else:
                    b += 1
        rejected += mcnemar_exact(b, c)[0] <= 0.05
    assert 0.76 <= rejected / 1000 <= 0.9


def test_fallback_levels_pass_a_rejections_level_on() -> None:
    assert fallback_levels(0.06, 3, []) == pytest.approx([0.02])
    assert fallback_levels(0.06, 3, [False, True]) == pytest.approx([0.02, 0.02, 0.04])
    assert fallback_levels(0.06, 3, [True, True, False]) == pytest.approx([0.02, 0.04, 0.06, 0.0])
    assert sum(fallback_levels(0.05, 4, [False] * 3)) == pytest.approx(0.05)


def test_the_exact_rate_interval_matches_r() -> None:
    # R: binom.test(5, 10)$conf.int, binom.test(10, 200)$conf.int; 0 of n: 1 - 0.025 ** (1 / n)
    assert rate_interval(5, 10) == pytest.approx((0.187086, 0.812914), abs=1e-6)
    assert rate_interval(10, 200) == pytest.approx((0.024234, 0.090028), abs=1e-6)
    assert rate_interval(0, 200) == pytest.approx((0.0, 1 - 0.025 ** (1 / 200)))
    assert rate_interval(7, 7)[1] == 1.0 and rate_interval(0, 0) == (0.0, 1.0)


def rows(
    solved: dict[str, list[bool]], rewards: dict[str, list[float]] | None = None
) -> list[dict[str, object]]:
    return [
        {
            "task_id": t,
            "seed": s,
            "passed": p,
            "reward": (rewards or {}).get(t, [float(x) for x in seeds])[s],
        }
        for t, seeds in solved.items()
        for s, p in enumerate(seeds)
    ]


def test_paired_counts_the_discordant_instances_and_tests_them() -> None:
    base = run_doc(rows({"a": [True, False], "b": [False, False], "c": [True, True], "d": [False, True]}))
    cand = run_doc(
        rows(
            {"a": [True, True], "b": [True, True], "c": [True, True], "d": [False, False]},
            {"d": [0.5, 0.0]},
        )
    )
    found = paired(base, cand)
    assert found["units"] == 8 and found["tasks"] == 4 and found["discordant"] == [1, 3]
    assert found["difference"] == 2 / 8 and found["interval"][0] <= 0.25 <= found["interval"][1]
    assert (found["mcnemar_p"], found["mcnemar_p_better"]) == mcnemar_exact(1, 3)
    assert found["reward"]["difference"] == pytest.approx((1 + 2 + 0.5 - 1) / 8)
    assert found["mde"] >= 6 / 8 and not found["detectable"]
    assert paired(base, cand) == found  # seeded: the same numbers again
    assert paired(base, cand, exclude={"b": "forked"})["discordant"] == [1, 1]
    nothing = paired(base, base)
    assert nothing["difference"] == 0 and nothing["mcnemar_p"] == 1.0 and nothing["mde"] == 6 / 8
