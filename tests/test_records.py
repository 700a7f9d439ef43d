"""Typed records: a stored run document round-trips through RunDoc unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replaykit.core.run_doc import EpisodeSummary, RunDoc
from replaykit.episodes.run import measure
from replaykit.testing import small_config
from replaykit.train.verdicts import outcomes


def test_a_measured_run_round_trips_through_rundoc(tmp_path: Path) -> None:
    run = measure(small_config(tmp_path, tasks=["hello-file"], seeds=[0, 1])).run
    doc = RunDoc.read(run.to_json())
    assert doc.to_json() == run.to_json()
    assert list(doc.to_json()) == list(run.to_json())  # same key order
    assert doc.total == 2 and doc.solved == sum(e.passed for e in run.episodes)
    assert {e.unit for e in doc.episodes} == set(outcomes(doc)) == {"hello-file#0", "hello-file#1"}


def test_episode_summary_tolerates_the_minimal_rows_criteria_accept() -> None:
    row: Any = {"task_id": "t", "seed": 3, "passed": 1, "infra_failure": 0, "reward": None}  # 0/1 as stored
    e = EpisodeSummary.model_validate(row)
    assert (e.unit, e.passed, e.reward, e.steps, e.tokens) == ("t#3", True, None, 0, 0)
