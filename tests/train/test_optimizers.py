"""Optimizers: registry, margin/significance, Pareto frontier (pure decisions, no git)."""

from __future__ import annotations

import pytest

from replaykit.core.errors import ConfigError
from replaykit.core.run_doc import RunDoc
from replaykit.testing import run_doc
from replaykit.train.criteria import StrictPareto
from replaykit.train.optim.base import StepInput
from replaykit.train.optim.frontier import ParetoFrontier
from replaykit.train.optim.greedy import GreedyMonotonic
from replaykit.train.optim.margin import MarginGreedy
from replaykit.train.optimizers import make_optimizer


def run(solved: set[str], units: tuple[str, ...] = ("a#0", "b#0", "c#0", "d#0")) -> RunDoc:
    return run_doc(
        [
            {
                "task_id": u.split("#")[0],
                "seed": int(u.split("#")[1]),
                "passed": u in solved,
                "infra_failure": False,
                "reward": float(u in solved),
                "steps": 1,
                "tokens": 1,
            }
            for u in units
        ]
    )


def step(
    epoch: int, head: str, parent: str, cand: str, base_solved: set[str], cand_solved: set[str]
) -> StepInput:
    b, c = run(base_solved), run(cand_solved)
    return StepInput(epoch, head, parent, cand, StrictPareto()(c, b), None, b, c)


def test_registry_and_bad_parameters() -> None:
    assert isinstance(make_optimizer("greedy_monotonic"), GreedyMonotonic)
    assert make_optimizer("margin_greedy", margin=2, alpha=0.1).params() == {"margin": 2, "alpha": 0.1}
    with pytest.raises(ConfigError, match="unknown optimizer 'sgd'"):
        make_optimizer("sgd")
    with pytest.raises(
        ConfigError, match=r"optimizer 'greedy_monotonic': unknown parameter 'lr' \(takes: no parameters\)"
    ):
        make_optimizer("greedy_monotonic", lr=0.1)
    with pytest.raises(ConfigError, match="alpha must be in"):
        make_optimizer("margin_greedy", alpha=2)


def test_greedy_promotes_what_the_criterion_accepts_and_never_a_skip() -> None:
    s = step(0, "h", "h", "c", {"a#0"}, {"a#0", "b#0"})
    assert GreedyMonotonic().decide(s)
    assert not GreedyMonotonic().decide(StepInput(0, "h", "h", "c", s.verdict, "harness no longer imports"))


def test_margin_and_significance() -> None:
    one_more = step(0, "h", "h", "c", {"a#0"}, {"a#0", "b#0"})
    three_more = step(0, "h", "h", "c", {"a#0"}, {"a#0", "b#0", "c#0", "d#0"})
    assert one_more.verdict and one_more.verdict.accept and three_more.verdict and three_more.verdict.accept
    assert MarginGreedy(margin=1).decide(one_more) and not MarginGreedy(margin=2).decide(one_more)
    assert MarginGreedy(margin=3).decide(three_more)
    # sign test: 3 up / 0 down gives p = 1/8
    assert MarginGreedy(margin=1, alpha=0.125).decide(three_more) and not MarginGreedy(
        margin=1, alpha=0.1
    ).decide(three_more)
    rejected = step(
        0, "h", "h", "c", {"a#0", "b#0"}, {"c#0", "d#0", "a#0"}
    )  # a regression: the criterion rejects
    assert not MarginGreedy(margin=0).decide(rejected)


def test_frontier_keeps_non_dominated_candidates_and_proposes_from_each_in_turn() -> None:
    opt = ParetoFrontier()
    assert opt.parent("h0") == "h0"
    # c1 solves b instead of a: rejected (regression) but not dominated -> kept beside the head
    assert not opt.decide(step(0, "h0", "h0", "c1", {"a#0"}, {"b#0"}))
    assert [m for m, _ in opt.members] == ["h0", "c1"]
    assert opt.parent("h0") == "c1"  # turn 1 of 2 members
    # proposed from c1 (not the head): accepted by the criterion but not a fast-forward -> kept, not promoted
    assert not opt.decide(step(1, "h0", "c1", "c2", {"b#0"}, {"b#0", "c#0"}))
    assert [m for m, _ in opt.members] == ["h0", "c2"]  # c2 dominates c1, which leaves
    assert opt.parent("h0") == "h0"
    # from the head: strictly more -> promoted; it dominates h0, which leaves; c2 stays (not dominated)
    assert opt.decide(step(2, "h0", "h0", "c3", {"a#0"}, {"a#0", "d#0"}))
    assert [m for m, _ in opt.members] == ["c2", "c3"]
    # a dominated candidate is not kept
    assert not opt.decide(step(3, "c3", "c3", "c4", {"a#0", "d#0"}, {"a#0"}))
    assert [m for m, _ in opt.members] == ["c2", "c3"]
    assert opt.state()["turn"] == 4
