"""Seed-robustness of a verdict on a synthetic store: exact subset counts, the subset cap, a reproducible bootstrap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.core.errors import ConfigError
from replaykit.core.records import EpisodeRow, RunDoc, RunDocument
from replaykit.train.criteria import StrictPareto
from replaykit.train.robustness import resample_seeds

SEEDS = list(range(16))


def run(run_id: str, passed: Any) -> RunDocument:
    episodes: list[EpisodeRow] = [
        {
            "task_id": t,
            "seed": s,
            "cassette_id": f"{run_id}-{t}-{s}",
            "passed": passed(t, s),
            "infra_failure": False,
            "reward": float(passed(t, s)),
            "steps": 1,
            "tokens": 1,
        }
        for t in ("a", "b")
        for s in SEEDS
    ]
    return {
        "run_id": run_id,
        "kind": "measure",
        "harness_sha": run_id,
        "model": {"name": "m", "endpoint": "e"},
        "config_digest": "c",
        "episodes": episodes,
        "cassettes": [e["cassette_id"] for e in episodes],
    }


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """Candidate: solves task b on seeds 0-11 (new), and loses task a on seeds 12-15 (regressions)."""
    st = Store(tmp_path / "store")
    base = run("base", lambda t, s: t == "a")
    cand = run("cand", lambda t, s: (t == "b" and s < 12) or (t == "a" and s < 12))
    st.put_run(base)
    st.put_run(cand)
    verdict = StrictPareto()(RunDoc.from_dict(cand), RunDoc.from_dict(base))
    assert not verdict.accept  # regressions on a#12..a#15
    st.put_doc(
        "v1",
        "verdict",
        {"verdict_id": "v1", "baseline_run": "base", "candidate_run": "cand", "verdict": verdict.to_dict()},
    )
    return st


def test_every_subset_is_counted_exactly(store: Store) -> None:
    rep = resample_seeds(store, "v1", 1)
    assert rep["total"] == 16 and rep["method"] == "subsets"
    # one seed at a time: seeds 0-11 show a new solve and no regression (accept, the rejection does not hold)
    assert [x["accept"] for x in rep["samples"]] == [s < 12 for s in SEEDS]
    assert (
        rep["holds"] == 4 and rep["summary"] == "this rejection survives 4 of 16 subsets of 1 of 16 seed(s)"
    )
    two = resample_seeds(store, "v1", 2)
    assert two["total"] == 120 and two["holds"] == 120 - 66  # C(16,2) pairs, C(12,2) of them all-clean


def test_too_many_subsets_needs_bootstrap_and_bootstrap_is_reproducible(store: Store) -> None:
    with pytest.raises(ConfigError, match="12870 subsets"):
        resample_seeds(store, "v1", 8)
    a, b = resample_seeds(store, "v1", 8, bootstrap=50), resample_seeds(store, "v1", 8, bootstrap=50)
    assert a["samples"] == b["samples"] and a["total"] == 50 and a["method"] == "bootstrap"
    with pytest.raises(ConfigError, match=r"use 1\.\.16"):
        resample_seeds(store, "v1", 17)
