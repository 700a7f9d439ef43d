"""Criteria: StrictPareto never accepts a regression; tie-breaks; infra bracketing; MeanReward."""

from __future__ import annotations

import random
from typing import Any

import pytest

from replaykit.core.errors import ConfigError
from replaykit.core.run_doc import RunDoc
from replaykit.testing import run_doc
from replaykit.train.criteria import MeanReward, StrictPareto, make_criterion


def run(results: dict[str, Any], steps: int = 2, tokens: int = 100) -> RunDoc:
    """results: unit -> True/False/"infra"."""
    episodes: list[dict[str, object]] = []
    for unit, r in results.items():
        task, seed = unit.split("#")
        episodes.append(
            {
                "task_id": task,
                "seed": int(seed),
                "passed": r is True,
                "infra_failure": r == "infra",
                "reward": 1.0 if r is True else 0.0,
                "steps": steps,
                "tokens": tokens,
            }
        )
    return run_doc(episodes)


def test_never_accepts_a_regression_randomised() -> None:
    rng = random.Random(7)
    crit = StrictPareto()
    for _ in range(500):
        units = [f"t{i}#{s}" for i in range(5) for s in range(2)]
        base = {u: rng.random() < 0.5 for u in units}
        cand = {u: rng.random() < 0.7 for u in units}
        verdict = crit(run(cand, steps=rng.randint(1, 5)), run(base, steps=rng.randint(1, 5)))
        regressed = [u for u in units if base[u] and not cand[u]]
        if regressed:
            assert not verdict.accept and verdict.regressions == regressed


def test_strictly_more_solved_accepts_with_movement() -> None:
    verdict = StrictPareto()(run({"a#0": True, "b#0": True}), run({"a#0": True, "b#0": False}))
    assert verdict.accept and verdict.new_solves == ["b#0"] and verdict.regressions == []
    assert verdict.loss == pytest.approx(-0.5)


def test_tie_is_broken_by_secondary_metrics() -> None:
    same = {"a#0": True, "b#0": False}
    fewer_steps = StrictPareto()(run(same, steps=1), run(same, steps=3))
    assert fewer_steps.accept and "fewer steps" in fewer_steps.reason
    more_tokens = StrictPareto()(run(same, tokens=200), run(same, tokens=100))
    assert not more_tokens.accept and "more tokens" in more_tokens.reason
    exact = StrictPareto()(run(same), run(same))
    assert not exact.accept and "exact tie" in exact.reason
    tokens_only = StrictPareto(secondary_metrics=["tokens"])(
        run(same, steps=1, tokens=100), run(same, steps=3, tokens=100)
    )
    assert not tokens_only.accept


def test_infra_failure_that_flips_the_verdict_is_unmeasurable() -> None:
    base = {"a#0": True, "b#0": False, "c#0": False}
    cand = {"a#0": "infra", "b#0": True, "c#0": False}
    verdict = StrictPareto()(run(cand), run(base))
    assert not verdict.accept and verdict.reason.startswith("unmeasurable") and "a#0" in verdict.reason


def test_infra_failure_that_does_not_flip_is_decided() -> None:
    base = {"a#0": False, "b#0": False, "c#0": False}
    cand = {"a#0": True, "b#0": True, "c#0": "infra"}
    verdict = StrictPareto()(run(cand), run(base))
    assert verdict.accept and verdict.metrics["infra"] == ["c#0"]


def test_excluded_tasks_do_not_count() -> None:
    base = {"a#0": True, "noisy#0": True}
    cand = {"a#0": True, "noisy#0": False}
    assert not StrictPareto()(run(cand), run(base)).accept
    verdict = StrictPareto()(run(cand), run(base), {"noisy": "forked"})
    assert verdict.regressions == [] and verdict.excluded == {"noisy": "forked"}
    assert verdict.reason.endswith("excluded (not counted): noisy (forked)")


def test_mean_reward_sign_test_and_counterfactual_difference() -> None:
    base = {f"t{i}#0": i == 0 for i in range(8)}
    cand = {f"t{i}#0": i != 0 for i in range(8)}  # 7 new solves, 1 regression
    assert not StrictPareto()(run(cand), run(base)).accept
    verdict = MeanReward(alpha=0.1)(run(cand), run(base))
    assert verdict.accept and verdict.metrics["wins"] == 7 and verdict.metrics["losses"] == 1
    assert verdict.metrics["p_value"] == pytest.approx(9 / 256)


def test_unknown_criterion_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="unknown criterion 'best'"):
        make_criterion("best")
    with pytest.raises(ConfigError, match="unknown secondary metric"):
        StrictPareto(secondary_metrics=["speed"])
