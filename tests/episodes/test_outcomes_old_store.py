"""Episodes recorded before outcomes existed (the shipped bundle) get theirs from their events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaykit.cassette.outcomes import OUTCOMES
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "cassettes" / "quickstart-training.tar.gz"


def test_the_shipped_bundles_episodes_are_classified_from_their_events(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert cli("cassettes", "import", str(BUNDLE), "--store", store, cwd=REPO).returncode == 0
    before = sorted(p.name + str(p.stat().st_size) for p in (tmp_path / "store").rglob("*"))
    rows = json.loads(cli("cassettes", "ls", "--json", "--store", store).stdout)
    episodes = [r for r in rows if r["kind"] == "episode"]
    assert len(episodes) > 16 and all(r["outcome"] in OUTCOMES for r in episodes)
    assert [r["outcome"] == "solved" for r in episodes] == [bool(r["passed"]) for r in episodes]
    assert {r["outcome"] for r in episodes} - {"solved"} <= {"verified_rejected", "no_valid_action", "crash"}
    assert all(r["outcome"] == "-" for r in rows if r["kind"] != "episode")  # proposals are not graded
    assert sorted(p.name + str(p.stat().st_size) for p in (tmp_path / "store").rglob("*")) == before
