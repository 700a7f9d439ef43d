"""Seed-robustness of a verdict on synthetic runs: exact subset counts, the subset cap, a
reproducible bootstrap (``resample``: the verdict as ``resample_seeds`` hands it over once
verified; a forged verdict is refused before, tests/cassette/test_forged_everywhere.py)."""

from __future__ import annotations

from typing import Any

import pytest

from replaykit.core.errors import ConfigError
from replaykit.core.run_doc import EpisodeSummary, ModelRef, RunDoc
from replaykit.core.verdict_doc import VerdictDoc
from replaykit.train.audit_records import SeedRobustness
from replaykit.train.criteria import StrictPareto
from replaykit.train.robustness import resample

SEEDS = list(range(16))


def run(run_id: str, passed: Any) -> RunDoc:
    episodes = [
        EpisodeSummary(
            task_id=t,
            seed=s,
            cassette_id=f"{run_id}-{t}-{s}",
            passed=passed(t, s),
            reward=float(passed(t, s)),
            steps=1,
            tokens=1,
        )
        for t in ("a", "b")
        for s in SEEDS
    ]
    return RunDoc(
        run_id=run_id,
        harness_sha=run_id,
        model=ModelRef(name="m", endpoint="e"),
        config_digest="c",
        episodes=episodes,
        cassettes=[e.cassette_id for e in episodes],
    )


Case = tuple[VerdictDoc, RunDoc, RunDoc]


@pytest.fixture
def case() -> Case:
    """Candidate: solves task b on seeds 0-11 (new), and loses task a on seeds 12-15 (regressions)."""
    base = run("base", lambda t, s: t == "a")
    cand = run("cand", lambda t, s: (t == "b" and s < 12) or (t == "a" and s < 12))
    verdict = StrictPareto()(cand, base)
    assert not verdict.accept  # regressions on a#12..a#15
    doc = VerdictDoc(
        verdict_id="v1",
        training_id="t",
        epoch=0,
        baseline_run="base",
        candidate_run="cand",
        baseline_sha="base",
        candidate_sha="cand",
        verdict=verdict.to_dict(),
    )
    return doc, base, cand


def resample_seeds(case: Case, k: int, bootstrap: int | None = None) -> SeedRobustness:
    return resample(*case, k, bootstrap)


def test_every_subset_is_counted_exactly(case: Case) -> None:
    rep = resample_seeds(case, 1)
    assert rep["total"] == 16 and rep["method"] == "subsets"
    # one seed at a time: seeds 0-11 show a new solve and no regression (accept, the rejection does not hold)
    assert [x["accept"] for x in rep["samples"]] == [s < 12 for s in SEEDS]
    assert (
        rep["holds"] == 4 and rep["summary"] == "this rejection survives 4 of 16 subsets of 1 of 16 seed(s)"
    )
    two = resample_seeds(case, 2)
    assert two["total"] == 120 and two["holds"] == 120 - 66  # C(16,2) pairs, C(12,2) of them all-clean


def test_too_many_subsets_needs_bootstrap_and_bootstrap_is_reproducible(case: Case) -> None:
    with pytest.raises(ConfigError, match="12870 subsets"):
        resample_seeds(case, 8)
    a, b = resample_seeds(case, 8, bootstrap=50), resample_seeds(case, 8, bootstrap=50)
    assert a["samples"] == b["samples"] and a["total"] == 50 and a["method"] == "bootstrap"
    with pytest.raises(ConfigError, match=r"use 1\.\.16"):
        resample_seeds(case, 17)
