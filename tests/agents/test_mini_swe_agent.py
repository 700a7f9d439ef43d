"""``replaykit run --agent mini-swe-agent``: mini-swe-agent 2.4.6's own CLI in its own process, its
model calls through the episode's recording bridge, its commands in the task's Docker container;
the run replayed offline in a network namespace with only loopback and no Docker daemon."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replaykit.agents.registry import get_agent
from replaykit.cassette.store import Store
from tests.cli_runner import cli

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]
TASKS = ["hello-file", "organize-files"]


@pytest.fixture(scope="module")
def recorded(
    mini_path: str,
    docker_base: str,
    docker_config: Callable[..., Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("mini-swe-agent")
    config = docker_config(
        tmp,
        {
            "panel.tasks": [str(REPO / "envs" / t) for t in TASKS],
            "panel.seeds": [0],
            "harness.params.max_steps": 6,
        },
    )
    proc = cli(
        "run", str(config), "--agent", "mini-swe-agent", "--model", "reference-strong", "--json", cwd=tmp
    )
    assert proc.returncode == 0, proc.stderr
    return {"tmp": tmp, "doc": json.loads(proc.stdout), "store": Store(tmp / "store")}


def test_every_model_call_went_through_the_bridge_and_every_command_into_the_container(
    recorded: dict[str, Any],
) -> None:
    doc, store = recorded["doc"], recorded["store"]
    assert doc["agent"] == {"name": "mini-swe-agent", "version": "2.4.6"}
    name = get_agent("mini-swe-agent").repo_name()
    assert doc["harness_repo"] == str(recorded["tmp"] / ".replaykit" / "agents" / name)
    assert doc["solved"] >= 1 and doc["total"] == 2
    for cid in doc["cassettes"]:
        episode = store.get_episode(cid)
        notes = episode.meta["notes"]
        assert episode.meta["agent"] == {"name": "mini-swe-agent", "version": "2.4.6"}
        assert episode.meta["env"]["kind"] == "docker" and dict(episode.key.extra)["env"] == "docker"
        calls = episode.llm_events
        # the agent's own trajectory counts the calls the cassette holds, one by one through the bridge
        assert notes["trajectory_api_calls"] == notes["bridge_model_calls"] == len(calls) >= 2
        for event in calls:
            body = event.body
            assert event.path == "/v1/chat/completions"
            assert body["model"] == "reference-strong" and body["temperature"] == 0.0
            assert "```mswea_bash_command" in body["messages"][0]["content"]  # its own system prompt
        # each command the model answered ran in the container as a recorded env step
        replies = [json.loads(e.content)["choices"][0]["message"]["content"] for e in calls]
        commands = [
            r.split("```mswea_bash_command\n", 1)[1].split("\n```", 1)[0] for r in replies if "```mswea" in r
        ]
        actions = [e.action for e in episode.env_events]
        assert actions == commands and notes["bridge_commands"] == len(actions) >= 1
        assert all(len(e.state_digest) == 64 for e in episode.env_events)  # the container's diff
        assert notes["returncode"] == 0 and "Traceback" not in notes["stderr"]


def test_replay_with_only_loopback_and_no_docker_is_identical(
    recorded: dict[str, Any], mini_path: str
) -> None:
    if not shutil.which("unshare"):
        pytest.fail("unshare (util-linux) is needed to cut the network for this replay", pytrace=False)
    doc = recorded["doc"]
    env = {
        **os.environ,
        "DOCKER_HOST": "unix:///nonexistent/docker.sock",
        "REPLAYKIT_AGENTS_PATH": mini_path,
    }
    store = str(recorded["tmp"] / "store")
    replay = f"ip link set lo up && exec {sys.executable} -m replaykit.cli replay {doc['run_id']} --store {store} --json"
    proc = subprocess.run(
        ["unshare", "--net", "sh", "-c", replay], capture_output=True, text=True, env=env, timeout=900
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["identical"], report["divergence"]
    assert [e["replayed_digest"] for e in report["episodes"]] == [e["digest"] for e in doc["episodes"]]
    assert "agent_note" not in report
