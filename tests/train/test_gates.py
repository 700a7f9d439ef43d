"""The smoke gate, candidate tests and the circuit breaker (issue 41 items 4 and 5) through the
real CLI: a candidate that crashes is skipped after one smoke episode (no panel run), a failing
test command skips its epoch, both replay from the record, and three broken candidates in a row
stop the training after two with one line; a higher limit resumes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.episodes.config_paths import TEMPLATES
from replaykit.models.reference.proposer import CURRICULUM, ENTRY, unified_diff
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

TASKS = ["hello-file", "fix-config-port", "csv-active-emails"]
SOURCE = (TEMPLATES / "quickstart" / "harness.py").read_text()


def broken(n: int) -> str:
    """A candidate that imports but raises as soon as it runs."""
    at = SOURCE.index("\n", SOURCE.index("):", SOURCE.index("def solve("))) + 1
    return unified_diff(
        ENTRY, SOURCE, SOURCE[:at] + f'    raise RuntimeError("broken candidate {n}")\n' + SOURCE[at:]
    )


def change(change_id: str) -> str:
    found = next(c for c in CURRICULUM if c.id == change_id)
    return unified_diff(ENTRY, SOURCE, SOURCE.replace(found.search, found.replace))


def config(tmp: Path, diffs: list[str], **overrides: Any) -> Path:
    names = []
    for i, diff in enumerate(diffs):
        (tmp / f"{i}.diff").write_text(diff)
        names.append(f"{i}.diff")
    return write_config(
        tmp,
        {
            "panel.tasks": [str(REPO_ROOT / "envs" / t) for t in TASKS],
            "train.epochs": len(diffs),
            "train.estimator": {"kind": "patch_queue", "diffs": names},
            **overrides,
        },
    )


def test_three_broken_candidates_trip_the_breaker_after_two_and_a_higher_limit_resumes(
    tmp_path: Path,
) -> None:
    cfg = config(tmp_path, [broken(0), broken(1), broken(2)])
    proc = cli("train", str(cfg), env={"COLUMNS": "80"})
    assert proc.returncode == 1, proc.stderr
    said = " ".join(proc.stdout.split())
    assert "circuit breaker: 2 consecutive skipped epochs (e0, e1)" in said
    assert "train.max_consecutive_skips: 2" in said and "stopped after epoch 1 of 3" in said
    assert all(len(line) <= 80 for line in proc.stdout.splitlines() if "circuit" in line)
    doc = json.loads(cli("train", str(cfg), "--json").stdout)  # the same limit: stops at once again
    assert doc["stopped"].startswith("circuit breaker") and len(doc["epochs"]) == 2
    for e in doc["epochs"]:
        assert e["skipped"].startswith(
            f"smoke: crashed on csv-active-emails#0: RuntimeError: broken candidate {e['epoch']}"
        )
        assert e["candidate_run"] is None and len(e["smoke"]) == 1  # one smoke episode, no panel run
        assert e["smoke"][0] in doc["cassettes"]  # the training names it: kept, exported, replayed
    # each skipped candidate cost one episode: the baseline's 6, then one smoke episode each
    assert len([r for r in Store(tmp_path / "store").list_cassettes() if r["kind"] == "episode"]) == 6 + 2
    cfg.write_text(cfg.read_text().replace("epochs: 3", "epochs: 3\n  max_consecutive_skips: 3"))
    resumed = cli("train", str(cfg), "--json")
    assert resumed.returncode == 0, resumed.stderr
    again = json.loads(resumed.stdout)
    assert again["training_id"] == doc["training_id"] and len(again["epochs"]) == 3
    assert "stopped" not in again and again["epochs"][2]["skipped"].startswith("smoke: crashed")
    replay = cli("replay", again["training_id"], "--store", str(tmp_path / "store"), "--json")
    assert replay.returncode == 0 and json.loads(replay.stdout)["identical"], replay.stdout


def test_a_failing_candidate_test_skips_its_epoch_and_replays_from_the_record(tmp_path: Path) -> None:
    probe = "touch left-behind && ! grep -q double-check harness.py"  # fails for verbose-prompt
    cfg = config(
        tmp_path, [change("retry-nudge"), change("verbose-prompt")], **{"train.candidate_tests": probe}
    )
    proc = cli("train", str(cfg), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    first, second = doc["epochs"]
    assert first["candidate_tests"]["exit_code"] == 0 and first["decision"] != "skipped"
    assert second["skipped"] == f"candidate tests: `{probe}` exited 1"
    assert second["candidate_tests"] == {"command": probe, "exit_code": 1, "output": ""}
    assert second["candidate_run"] is None and second["smoke"]  # the smoke run passed first
    assert first["smoke"][0] in Store(tmp_path / "store").get_run(first["candidate_run"]).cassettes
    assert not (tmp_path / "harness" / "left-behind").exists()  # a clean checkout, not the repo
    replay = cli("replay", doc["training_id"], "--store", str(tmp_path / "store"), "--json")
    assert replay.returncode == 0 and json.loads(replay.stdout)["identical"], replay.stdout
