"""Offline replay: no server, no sockets; divergences found and explained."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import git
import pytest
import yaml

from replaykit.cassette.events import LlmEvent
from replaykit.cassette.store import Store
from replaykit.core.modes import RecordMode
from replaykit.episodes.harness import commit_all
from replaykit.episodes.replay import replay_run
from replaykit.episodes.run import measure
from replaykit.testing import small_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


TASKS = ["hello-file", "fix-config-port"]


@pytest.fixture()
def recorded(tmp_path: Path) -> dict[str, Any]:
    config = small_config(tmp_path, tasks=TASKS, seeds=[0, 1], **{"model.name": "reference-weak"})
    result = measure(config)
    return {"config": config, "run": result.run.to_json(), "store": Store(config.store_path), "tmp": tmp_path}


def test_replay_with_server_down_and_sockets_blocked(
    recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("replay tried to open a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    report = replay_run(recorded["store"], recorded["run"]["run_id"])
    assert report["identical"] and len(report["episodes"]) == 4
    assert {e["replayed_digest"] for e in report["episodes"]} == {
        e["digest"] for e in recorded["run"]["episodes"]
    }


def test_altered_stored_request_is_a_divergence(recorded: dict[str, Any]) -> None:
    store: Store = recorded["store"]
    cassette_id = recorded["run"]["cassettes"][0]
    episode = store.get_episode(cassette_id)
    first = episode.events[0]
    assert isinstance(first, LlmEvent)
    first.body["messages"][0]["content"] = "You are a tampered agent."
    store.put_episode(episode)  # a consistent rewrite (not damage): the run is re-measured from cassettes
    measure(recorded["config"], record_mode=RecordMode.NONE, store=store)
    report = replay_run(store, recorded["run"]["run_id"])
    assert not report["identical"] and report["divergences"] == 1
    div = report["divergence"]
    assert div is not None
    assert div["episode"] == cassette_id and div["position"] == 0 and div["kind"] == "llm"
    assert any("tampered" in line and line.startswith("-") for line in div["diff"])
    assert any("You are a shell agent" in line and line.startswith("+") for line in div["diff"])


def test_harness_with_other_prompt_diverges_via_cli(recorded: dict[str, Any]) -> None:
    repo_path = recorded["config"].repo_path
    repo = git.Repo(repo_path)
    source = (repo_path / "harness.py").read_text()
    (repo_path / "harness.py").write_text(
        source.replace("You are a shell agent.", "You are a meticulous shell agent.")
    )
    sha = commit_all(repo, "reword the system prompt")
    proc = cli(
        "replay",
        recorded["run"]["run_id"],
        "--harness",
        sha[:10],
        "--harness-repo",
        str(repo_path),
        "--store",
        str(recorded["config"].store_path),
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "divergence" in proc.stdout and "at event 0" in proc.stdout
    assert "-" in proc.stdout and "meticulous" in proc.stdout
    assert "DIVERGED" in proc.stdout


def test_same_harness_content_at_other_commit_replays_identically(recorded: dict[str, Any]) -> None:
    repo_path = recorded["config"].repo_path
    repo = git.Repo(repo_path)
    (repo_path / "NOTES.md").write_text("notes only\n")
    sha = commit_all(repo, "add notes")
    report = replay_run(
        recorded["store"], recorded["run"]["run_id"], harness_ref=sha, repo_path=str(repo_path)
    )
    assert report["identical"] and report["replayed_harness_sha"] == sha


def test_harness_ref_resolves_in_the_current_repo_never_the_recorded_path(recorded: dict[str, Any]) -> None:
    """Another checkout (here: a clone with one more commit) and a config naming it: ``--harness
    REF`` is found there, never in the repository path the run recorded; without a repo to look
    in, or with a REF that is not there, one line."""
    tmp, config, run_id = recorded["tmp"], recorded["config"], recorded["run"]["run_id"]
    store = str(config.store_path)
    other = tmp / "checkout"
    clone = git.Repo.clone_from(str(config.repo_path), other)
    with clone.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.com")
    (other / "harness.py").write_text(
        (other / "harness.py").read_text().replace("You are a shell agent.", "You are a careful shell agent.")
    )
    sha = commit_all(clone, "only in the other checkout")
    data = yaml.safe_load((tmp / "config.yaml").read_text())  # small_config's file
    data["harness"] = {**data["harness"], "repo": str(other), "template": None}
    other_config = tmp / "other.yaml"
    other_config.write_text(yaml.safe_dump(data))

    found = cli("replay", run_id, "--harness", sha[:10], "--config", str(other_config), "--json", timeout=300)
    assert found.returncode == 1 and '"replayed_harness_sha": "' + sha in found.stdout, found.stderr
    nowhere = cli("replay", run_id, "--harness", sha[:10], "--store", store)
    assert nowhere.returncode == 1 and nowhere.stderr == (
        f"Error: --harness {sha[:10]} needs the harness repository to find it in: add --config CFG "
        "(its harness.repo) or --harness-repo PATH\n"
    )
    missing = cli(
        "replay", run_id, "--harness", "no-such-ref", "--harness-repo", str(other), "--store", store
    )
    assert missing.returncode == 1 and missing.stderr == (
        f"Error: harness ref 'no-such-ref' does not exist in {other}; give a branch, tag or SHA\n"
    )
