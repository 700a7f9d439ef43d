"""Replicate statistics and the noise floor (train/stats.py), and min_margin: noise."""

from __future__ import annotations

import pytest

from replaykit.core.errors import ConfigError
from replaykit.testing import run_doc
from replaykit.train.criteria import make_criterion
from replaykit.train.stats import noise, paired_interval, run_stats, task_stats


def rows(solved: dict[str, list[bool]], reward: float | None = None) -> list[dict[str, object]]:
    return [
        {"task_id": t, "seed": s, "passed": p, "reward": float(p) if reward is None else reward}
        for t, seeds in solved.items()
        for s, p in enumerate(seeds)
    ]


def test_pass_at_k_and_pass_hat_k_are_the_unbiased_estimators() -> None:
    # 4 seeds, 1 solved: pass@1 = 1/4, pass@2 = 1 - C(3,2)/C(4,2) = 1/2, pass@4 = 1; pass^2 = 0
    t = task_stats("a", run_doc(rows({"a": [True, False, False, False]})).episodes)
    assert t["pass_at_k"] == {"1": 0.25, "2": 0.5, "3": 0.75, "4": 1.0}
    assert t["pass_hat_k"] == {"1": 0.25, "2": 0.0, "3": 0.0, "4": 0.0}
    assert t["flip_rate"] == 0.5  # 3 of the 6 seed pairs disagree


def test_a_runs_statistics_average_over_tasks_and_pool_the_flips() -> None:
    run = run_doc(rows({"a": [True, True], "b": [True, False], "c": [False, False]}))
    stats = run_stats(run, {"a": "deterministic", "b": "forked"})
    assert stats["pass_at_k"] == {"1": 0.5, "2": 2 / 3} and stats["pass_hat_k"] == {"1": 0.5, "2": 1 / 3}
    assert (stats["seed_flip_rate"], stats["seed_pairs"]) == (1 / 3, 3)
    assert (stats["reexec_flip_rate"], stats["reexec_certified"], stats["reexec_forked"]) == (0.5, 2, 1)
    one_seed = run_stats(run_doc(rows({"a": [True]})))
    assert one_seed["seed_flip_rate"] is None and one_seed["reexec_flip_rate"] is None


def test_the_paired_interval_is_seeded_and_holds_the_mean() -> None:
    base = run_doc(rows({t: [False, False] for t in "abcdefgh"}))
    cand = run_doc(rows({**{t: [True, True] for t in "abcde"}, **{t: [False, False] for t in "fgh"}}))
    first = paired_interval(base, cand)
    assert first == paired_interval(base, cand)  # replays to the same numbers
    assert first["mean_diff"] == 5 / 8 and first["low"] <= 5 / 8 <= first["high"]
    assert first["low"] > 0 and first["units"] == 16 and first["samples"] == 1000
    assert paired_interval(base, cand, seed=1) != first  # the seed is what makes it repeat
    assert paired_interval(base, cand, exclude={"a": "forked"})["mean_diff"] == 4 / 7


def test_a_margin_within_the_seed_flip_rate_is_within_noise() -> None:
    flaky = {t: [True, False] for t in "abcd"}  # every task flips between its two seeds
    base = run_doc(rows({**flaky, "e": [False, False]}))
    cand = run_doc(rows({**flaky, "e": [True, False]}))
    found = noise(base, cand)
    assert found["margin"] == 0.1 and found["seed_flip_rate"] is not None and found["seed_flip_rate"] > 0.1
    assert found["within_noise"] and found["noise_floor"] >= found["seed_flip_rate"]
    steady = {t: [False, False] for t in "abcdefgh"}
    clear = noise(run_doc(rows(steady)), run_doc(rows({t: [True, True] for t in steady})))
    assert clear["margin"] == 1.0 and not clear["within_noise"] and clear["seed_flip_rate"] == 0.0


@pytest.mark.parametrize("name", ["strict_pareto", "mean_reward"])
def test_min_margin_noise_refuses_a_win_within_the_floor(name: str) -> None:
    flaky = {t: [True, False] for t in "abcd"}
    base, cand = run_doc(rows({**flaky, "e": [False, False]})), run_doc(rows({**flaky, "e": [True, False]}))
    plain, guarded = make_criterion(name)(cand, base), make_criterion(name, min_margin="noise")(cand, base)
    if name == "mean_reward":  # one instance up: the sign test alone accepts nothing at alpha 0.1 …
        plain = make_criterion(name, alpha=0.5)(cand, base)
        guarded = make_criterion(name, alpha=0.5, min_margin="noise")(cand, base)
    assert plain.accept and not guarded.accept
    assert "refused by min_margin noise: margin +0.100 is within the noise floor" in guarded.reason
    noise_doc = guarded.metrics["noise"]
    assert isinstance(noise_doc, dict) and noise_doc["within_noise"] is True
    assert guarded.params["min_margin"] == "noise" and "min_margin" not in plain.params  # old ids stay
    steady = {t: [False, False] for t in "abcdefgh"}
    clear = make_criterion(name, min_margin="noise")(
        run_doc(rows({t: [True, True] for t in steady})), run_doc(rows(steady))
    )
    assert clear.accept


def test_min_margin_takes_only_noise() -> None:
    with pytest.raises(ConfigError, match="min_margin 'wide': the one margin is 'noise'"):
        make_criterion("strict_pareto", min_margin="wide")


def test_the_replicates_cell_names_seed_disagreement_and_its_denominators() -> None:
    """Two seeds disagreeing is "disagree" (never "flips": that is baseline → candidate movement)
    and the certified count names what it is of (issue 40 item 3)."""
    from replaykit.train.evidence import replicates_text

    stats = {
        "seeds": 2,
        "pass_at_k": {"2": 0.5},
        "pass_hat_k": {"2": 0.375},
        "seed_flip_rate": 0.125,
        "reexec_flip_rate": 0.0,
        "reexec_forked": 0,
        "reexec_certified": 8,
    }
    assert replicates_text(stats) == "pass@2 0.50 pass^2 0.38 disagree 0.12 forked 0 of 8 certified"
