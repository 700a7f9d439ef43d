"""Held-out panels (issue 41 item 1) through the real CLI: a training on 4 training tasks with
``train.panels: {val: [2 tasks], test: [2 tasks]}`` reports the three solve rates per epoch,
decides on val, measures test for the baseline and each accepted candidate, never lets a
held-out task reach the proposer, and replays, audits, reports and shows in the viewer."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.events import LlmEvent
from replaykit.cassette.store import Store
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli
from tests.view.conftest import Viewer

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

TRAIN = ["hello-file", "organize-files", "checksum-release", "count-error-lines"]
VAL = ["csv-active-emails", "fix-config-port"]
TEST = ["json-release-tag", "run-build-script"]


def envs(names: list[str]) -> list[str]:
    return [str(REPO_ROOT / "envs" / n) for n in names]


def instruction(task: str) -> str:
    """A distinctive line of a task's instruction (what a leaked task would show)."""
    text = (REPO_ROOT / "envs" / task / "instruction.md").read_text()
    longest: str = max((line.strip() for line in text.splitlines()), key=len)
    return longest


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("panels")
    config = write_config(
        tmp,
        {
            "panel.tasks": envs(TRAIN),
            "train.epochs": 2,
            "train.panels": {"val": envs(VAL), "test": envs(TEST)},
        },
    )
    proc = cli("train", str(config), "--json")
    assert proc.returncode == 0, proc.stderr
    return {"tmp": tmp, "config": config, "doc": json.loads(proc.stdout), "store": tmp / "store"}


def test_every_epoch_reports_train_val_and_test_and_val_decides(trained: dict[str, Any]) -> None:
    doc = trained["doc"]
    assert doc["format"] == 2 and len(doc["epochs"]) == 2
    for e in doc["epochs"]:
        panels = e["panels"]
        assert set(panels) == {"train", "val", "test"}
        totals = {name: panels[name]["baseline"]["total"] for name in panels}
        assert totals == {"train": 8, "val": 4, "test": 4}  # tasks × the panel's two seeds
        for view in panels.values():
            base = view["baseline"]
            assert (
                base["rate"] == base["solved"] / base["total"] and base["low"] <= base["rate"] <= base["high"]
            )
        # the verdict compared the val runs: the criterion decided on val
        assert (e["baseline_run"], e["candidate_run"]) == (
            panels["val"]["baseline_run"],
            panels["val"]["candidate_run"],
        )
        assert e["verdict"]["metrics"]["solved_baseline"] == panels["val"]["baseline"]["solved"]
        assert panels["train"]["candidate"] is not None  # the proposer's next brief reads it
        # test: measured for the baseline, and for the candidate only when it was accepted
        assert (panels["test"]["candidate"] is not None) == (e["decision"] == "accepted")
        gap = e["gap"]["val_train"]
        val, train = panels["val"]["baseline"], panels["train"]["baseline"]
        assert (
            gap["diff"] == pytest.approx(val["rate"] - train["rate"])
            and gap["low"] <= gap["diff"] <= gap["high"]
        )
    assert [e["decision"] for e in doc["epochs"]] == ["accepted", "rejected"]
    # the accepted candidate's test run is the next epoch's baseline test run: measured once
    first, second = doc["epochs"]
    assert first["panels"]["test"]["candidate_run"] == second["panels"]["test"]["baseline_run"]


def test_no_held_out_task_reaches_the_proposer(trained: dict[str, Any]) -> None:
    store = Store(trained["store"])
    proposals = [e["proposal_cassette"] for e in trained["doc"]["epochs"]]
    assert len(proposals) == 2 and set(proposals) <= set(trained["doc"]["cassettes"])
    held_out = [*VAL, *TEST]
    seen_train = False
    for cassette in proposals:
        episode = store.get_episode(cassette)
        requests = [json.dumps(e.body) for e in episode.events if isinstance(e, LlmEvent)]
        assert requests
        for text in requests:
            for task in held_out:
                assert task not in text, f"{task} leaked into proposal {cassette}"
                assert instruction(task) not in text
            seen_train = seen_train or any(t in text for t in TRAIN)
        assert not any(t in json.dumps(episode.meta) for t in held_out)
    assert seen_train  # the proposer does see the training panel


def test_panels_replay_audit_report_and_view(trained: dict[str, Any]) -> None:
    tid, store = trained["doc"]["training_id"], str(trained["store"])
    replay = cli("replay", tid, "--store", store, "--json")
    assert replay.returncode == 0, replay.stderr
    report = json.loads(replay.stdout)
    assert report["identical"] and len(report["runs"]) == len(trained["doc"]["runs"])
    assert all(r["identical"] for r in report["runs"])
    audit = cli("audit", tid, "--store", store, "--json")
    assert audit.returncode == 0, audit.stderr
    out = trained["tmp"] / "report.html"
    made = cli("report", tid, "-o", str(out), "--store", store, "--json")
    assert made.returncode == 0 and "panels" in json.loads(made.stdout)["charts"]
    html = out.read_text()
    assert 'id="panels-table"' in html and html.count("<tr><td>") >= 2
    viewer = Viewer(trained["store"], trained["tmp"] / "view-cache")
    try:
        with urllib.request.urlopen(f"{viewer.url}/trainings/{tid}", timeout=60) as answer:
            page = answer.read().decode()
    finally:
        viewer.stop()
    assert 'id="panels-table"' in page and "val − train" in page
    rows = re.findall(r'<tr><td class="num">(\d+)</td>', page.split('id="panels-table"', 1)[1])
    assert rows[:2] == ["0", "1"]


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"train.panels": {"val": envs(["hello-file"])}}, "task hello-file is in the train panel too"),
        ({"train.panels": {"val": envs(VAL), "test": envs(VAL[:1])}}, "is in the val panel too"),
        ({"train.panels": {"val": []}}, "field 'train.panels.val': empty"),
        ({"train.proposer_visible": ["../secrets/*"]}, "outside the harness repository"),
        ({"train.proposer_visible": ["/etc/*"]}, "outside the harness repository"),
        ({"train.max_consecutive_skips": 0}, "field 'train.max_consecutive_skips'"),
    ],
)
def test_bad_panels_are_one_line_and_make_nothing(
    tmp_path: Path, overrides: dict[str, Any], says: str
) -> None:
    config = write_config(tmp_path, {"panel.tasks": envs(TRAIN), **overrides})
    proc = cli("train", str(config))
    assert proc.returncode == 1 and says in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "store").exists() and not (tmp_path / "harness").exists()
