"""End to end through the real CLI: record a run, reuse it, replay it offline."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli as run_cli
from tests.store_sql import raw_sql

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


cli = functools.partial(run_cli, check=True)  # a failing command fails the test


def run_json(*args: str, **kw: Any) -> Any:  # --json: a list or an object
    return json.loads(cli(*args, "--json", **kw).stdout)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("quickstart")
    config = write_config(tmp)
    first = run_json("run", str(config))
    return {"tmp": tmp, "config": config, "first": first, "store": str(tmp / "store")}


def test_quickstart_records_whole_panel(quickstart: dict[str, Any]) -> None:
    first = quickstart["first"]
    assert len(first["panel"]["tasks"]) >= 6 and first["panel"]["seeds"] == [0, 1]
    assert first["recorded_count"] == first["total"] == len(first["episodes"]) >= 12
    assert all(len(e["digest"]) == 64 for e in first["episodes"])
    assert len(first["harness_sha"]) == 40 and first["model"]["endpoint"] == "builtin"


def test_second_run_reuses_every_cassette(quickstart: dict[str, Any]) -> None:
    second = run_json("run", str(quickstart["config"]))
    assert second["recorded_count"] == 0 and second["reused_count"] == second["total"]
    assert second["run_id"] == quickstart["first"]["run_id"]
    assert [e["digest"] for e in second["episodes"]] == [e["digest"] for e in quickstart["first"]["episodes"]]
    human = cli("run", str(quickstart["config"])).stdout
    assert "reused 16 cassette(s) (no model calls)" in human


def test_replay_is_identical_offline(quickstart: dict[str, Any]) -> None:
    report = run_json("replay", quickstart["first"]["run_id"], "--store", quickstart["store"])
    assert report["identical"] is True and report["divergence"] is None
    assert [e["replayed_digest"] for e in report["episodes"]] == [
        e["digest"] for e in quickstart["first"]["episodes"]
    ]


def test_two_models_solve_different_counts(quickstart: dict[str, Any]) -> None:
    strong = run_json("run", str(quickstart["config"]), "--model", "reference-strong")
    assert strong["solved"] != quickstart["first"]["solved"]
    assert strong["run_id"] != quickstart["first"]["run_id"]


def test_record_mode_none_refuses_missing_cassettes(quickstart: dict[str, Any]) -> None:
    proc = cli(
        "run", str(quickstart["config"]), "--model", "reference-oracle", "--record-mode", "none", check=False
    )
    assert proc.returncode == 1
    assert (
        proc.stderr.startswith("Error: record mode none replays only: no cassette for task")
        and "Traceback" not in proc.stderr
        and "import the bundle that holds it, or record it with --record-mode once" in proc.stderr
    )


def test_record_mode_all_rerecords_identically(quickstart: dict[str, Any]) -> None:
    again = run_json("run", str(quickstart["config"]), "--record-mode", "all")
    assert again["recorded_count"] == again["total"]
    assert [e["digest"] for e in again["episodes"]] == [e["digest"] for e in quickstart["first"]["episodes"]]


def test_cassettes_ls_and_show(quickstart: dict[str, Any]) -> None:
    rows = run_json("cassettes", "ls", "--run", quickstart["first"]["run_id"], "--store", quickstart["store"])
    assert len(rows) == quickstart["first"]["total"]
    doc = run_json("cassettes", "show", rows[0]["id"][:10], "--store", quickstart["store"])
    kinds = [e["kind"] for e in doc["events"]]
    assert kinds[0] == "llm" and kinds[-1] == "grade" and "env" in kinds
    text = cli("cassettes", "show", rows[0]["id"], "--store", quickstart["store"]).stdout
    assert "POST /v1/chat/completions" in text and "--full shows all" in text


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    missing = cli("run", str(tmp_path / "nope.yaml"), check=False)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  temperature: hot\n")
    proc = cli("run", str(bad), check=False)
    assert (
        proc.returncode == 1 and "field 'model.temperature'" in proc.stderr and "Traceback" not in proc.stderr
    )
    mode = cli("run", str(write_config(tmp_path)), "--record-mode", "sometimes", check=False)
    assert (
        mode.returncode == 2 and "'sometimes' is not one of" in mode.stderr and mode.stderr.count("\n") == 1
    )  # a usage error
    unknown = cli("replay", "deadbeef00", "--store", str(tmp_path / "store"), check=False)
    assert unknown.returncode == 1 and "no store at" in unknown.stderr and unknown.stderr.count("\n") == 1
    assert not (tmp_path / "store").exists()  # a read-only command never creates a store


def test_dirty_harness_is_refused(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {"panel.seeds": [0], "panel.tasks": [str(Path(__file__).parents[1] / "envs" / "hello-file")]},
    )
    cli("run", str(config))
    (tmp_path / "harness" / "harness.py").write_text("# edited\n")
    proc = cli("run", str(config), check=False)
    assert proc.returncode == 1 and "uncommitted changes" in proc.stderr


def test_kill_during_recording_leaves_store_readable(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "replaykit.cli", "run", str(config), "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    store = Store(tmp_path / "store")
    deadline = time.time() + 120
    while time.time() < deadline:
        if (tmp_path / "store" / "index.db").exists() and store.count_cassettes() >= 1:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store.close()
    reopened = Store(tmp_path / "store")
    assert raw_sql(reopened).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = reopened.list_cassettes()
    assert 1 <= len(rows) < 16
    for row in rows:  # every cassette present is whole
        episode = reopened.get_episode(row["id"])
        assert episode.events[-1].kind == "grade" and episode.digest == row["digest"]
    # and the interrupted run completes, reusing what was recorded
    resumed = run_json("run", str(config))
    assert resumed["reused_count"] == len(rows) and resumed["recorded_count"] == 16 - len(rows)


def test_a_task_refused_at_load_is_one_infra_episode_under_keep_going(tmp_path: Path) -> None:
    """A panel task whose task.toml does not load: without --keep-going the run stops with one
    line and records nothing; with it, that task is one infra episode per seed whose reason
    `run --json` and the table carry, and the rest of the panel is measured."""
    import shutil

    broken = tmp_path / "tasks" / "broken"
    shutil.copytree(REPO_ROOT / "envs" / "hello-file", broken)
    (broken / "task.toml").write_text((broken / "task.toml").read_text() + "\nbogus = [\n")
    config = write_config(
        tmp_path,
        {"panel.tasks": [str(broken), str(REPO_ROOT / "envs" / "hello-file")], "panel.seeds": [0, 1]},
    )
    stopped = run_cli("run", str(config), cwd=tmp_path)
    assert stopped.returncode != 0 and "invalid TOML" in stopped.stderr and "Traceback" not in stopped.stderr
    assert not (tmp_path / "store").exists()
    run = json.loads(cli("run", str(config), "--keep-going", "--json", cwd=tmp_path, check=True).stdout)
    infra = [e for e in run["episodes"] if e["task_id"] == "broken"]
    assert len(infra) == 2 and all(
        e["outcome"] == "infra" and "invalid TOML" in e["reason"] for e in infra
    ), run
    assert all(
        not e["infra_failure"] and "reason" not in e for e in run["episodes"] if e["task_id"] == "hello-file"
    )
    table = cli("run", str(config), "--keep-going", cwd=tmp_path, check=True).stdout
    assert "broken#0, broken#1: environment not prepared: task broken refused at load:" in table, table
