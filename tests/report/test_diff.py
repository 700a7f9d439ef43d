"""`cassettes diff`: the first point where two episodes part, on the quickstart's accepted verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.events import Episode, GradeEvent
from replaykit.envs.results import Grade
from replaykit.report.diff import diff_episodes, side_by_side
from tests.cli_runner import cli as run_cli

from .conftest import cli, episodes_by_unit

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def test_first_difference_of_a_new_solve_is_the_retry_nudge(quickstart_training: dict[str, Any]) -> None:
    summary, store = quickstart_training["summary"], str(quickstart_training["store"])
    accepted = [e for e in summary["epochs"] if e["decision"] == "accepted"]
    assert accepted, "the quickstart training accepts a candidate"
    epoch = accepted[0]
    assert epoch["description"].startswith("[retry-nudge]")
    base, cand = (
        episodes_by_unit(store, epoch["baseline_run"]),
        episodes_by_unit(store, epoch["candidate_run"]),
    )
    new_solves = epoch["verdict"]["new_solves"]
    assert new_solves
    for unit in new_solves:
        doc = json.loads(cli("cassettes", "diff", base[unit], cand[unit], "--store", store, "--json").stdout)
        first = doc["first_difference"]
        assert first["part"] == "request" and first["kind"] == "call", unit
        added = [row["b"] for row in first["side_by_side"] if row["tag"] == "insert"]
        assert added[0] == "[user]" and added[1].startswith("The command failed (exit code "), (unit, added)
        assert all(row["same"] for row in doc["aligned"][: first["position"]])
        assert doc["grades"][0]["passed"] is False and doc["grades"][1]["passed"] is True
    # the terminal view says the same, side by side
    unit = new_solves[0]
    text = cli("cassettes", "diff", base[unit][:10], cand[unit][:10], "--store", store).stdout
    assert "first difference at event" in text and "request" in text and "Fix it and retry." in text


def test_identical_episodes_and_bad_ids(quickstart_training: dict[str, Any]) -> None:
    summary, store = quickstart_training["summary"], str(quickstart_training["store"])
    some = next(iter(episodes_by_unit(store, summary["epochs"][0]["baseline_run"]).values()))
    doc = json.loads(cli("cassettes", "diff", some, some, "--store", store, "--json").stdout)
    assert doc["identical"] and doc["first_difference"] is None
    bad = cli("cassettes", "diff", some, "nosuchcassette", "--store", store, check=False)
    assert (
        bad.returncode == 1
        and bad.stderr.startswith("Error: no cassette 'nosuchcassette'")
        and "Traceback" not in bad.stderr
    )


def test_an_episode_that_ends_early_parts_at_its_end() -> None:
    from replaykit.cassette.keys import CassetteKey, ModelId

    key = CassetteKey("0" * 40, "t", "d", ModelId("m", "e"), 0, "c")
    grade = GradeEvent(Grade(1.0, True, False, "ok"))
    doc = diff_episodes(Episode(key, [grade]), Episode(key, []))
    assert doc["first_difference"] is not None
    assert doc["first_difference"]["part"] == "kind" and doc["first_difference"]["b_lines"] == [
        "(the episode has ended)"
    ]
    rows = side_by_side(["x", "y", "z"], ["x", "Y", "z", "w"])
    assert [r["tag"] for r in rows] == ["equal", "replace", "equal", "insert"]


def test_diff_of_the_accepted_verdict_shows_the_retry_nudge_for_each_new_solve(
    quickstart_training: dict[str, Any],
) -> None:
    summary, store = quickstart_training["summary"], str(quickstart_training["store"])
    epoch = next(e for e in summary["epochs"] if e["decision"] == "accepted")
    doc = json.loads(cli("cassettes", "diff", epoch["verdict_id"][:8], "--store", store, "--json").stdout)
    assert doc["verdict_id"] == epoch["verdict_id"] and doc["accept"] is True
    assert [u["unit"] for u in doc["units"]] == epoch["verdict"]["new_solves"]
    for u in doc["units"]:
        assert u["movement"] == "new solve" and u["first_difference"]["part"] == "request"
        assert any(
            line.startswith("+The command failed (exit code ") for line in u["first_difference"]["unified"]
        )
    one = epoch["verdict"]["new_solves"][0]
    text = cli("cassettes", "diff", epoch["verdict_id"], "--unit", one, "--store", store).stdout
    assert f"new solve: {one}" in text and "Fix it and retry." in text
    bad = cli("cassettes", "diff", epoch["verdict_id"], "--unit", "nope#9", "--store", store, check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("Error: --unit 'nope#9' is not in both runs")


def test_a_verdict_whose_candidate_was_not_measured_is_one_error_line(
    quickstart_training: dict[str, Any], tmp_path: Path
) -> None:
    """A stored verdict that names no candidate run (one is stored only once both runs were
    measured): ``cassettes diff`` and ``report`` both verify it first and call it corrupt in one
    line naming the missing run, not a "no run None" lookup; never a traceback."""
    from replaykit.cassette.store import Store

    store = tmp_path / "store"
    shutil.copytree(quickstart_training["store"], store)
    st = Store(store)
    verdict_id = next(r["id"] for r in st.doc_rows("verdict"))
    doc = dict(st.get_doc(verdict_id, kind="verdict"))
    doc.update(verdict_id="0" * 16, candidate_run=None, runs=[doc["baseline_run"], None])
    st.put_doc("0" * 16, "verdict", doc)
    st.close()
    for args in (("cassettes", "diff", "0" * 16), ("report", "0" * 16, "-o", str(tmp_path / "r.html"))):
        proc = run_cli(*args, "--store", str(store))
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert lines[0].startswith(
            "Error: store corrupt: verdict 0000000000000000: it names no candidate run"
        )
