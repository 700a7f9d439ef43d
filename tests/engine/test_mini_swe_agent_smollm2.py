"""mini-swe-agent (its own CLI, in its own process) on a real model: SmolLM2-135M-Instruct on
llama.cpp's llama-server, commands in Docker containers. Every call the agent made went through
the recording bridge (its own trajectory counts them); with the engine stopped and the network
cut, the run replays identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from replaykit.cassette.store import Store
from replaykit.testing import REPO_ROOT, write_config
from replaykit.testing.llama_server import LlamaServer
from tests.cli_runner import cli

pytestmark = [pytest.mark.engine, pytest.mark.docker]


def test_mini_swe_agent_on_smollm2_records_through_the_bridge_and_replays_offline(
    smollm2: Path,
    mini_path: str,
    docker_base: str,
    tmp_path: Path,
) -> None:
    with LlamaServer(smollm2, n_ctx=4096, engine="llama-server", alias="smollm2") as server:
        config = write_config(
            tmp_path,
            {
                "model.base_url": server.base_url,
                "panel.tasks": [str(REPO_ROOT / "configs" / "real-model" / "tasks" / "touch-file")],
                "panel.seeds": [0],
                "harness.params.max_steps": 3,
                "train": None,  # a run, not the training the config also describes
            },
            base="real-model.yaml",
        )
        proc = cli("run", str(config), "--agent", "mini-swe-agent", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["agent"]["name"] == "mini-swe-agent" and doc["model"]["name"] == "smollm2"
    episode = Store(tmp_path / "store").get_episode(doc["cassettes"][0])
    notes = episode.meta["notes"]
    assert notes["trajectory_api_calls"] == notes["bridge_model_calls"] == len(episode.llm_events) >= 1
    assert all(e.body["model"] == "smollm2" and e.body["max_tokens"] == 48 for e in episode.llm_events)
    replay = f"ip link set lo up && exec {sys.executable} -m replaykit.cli replay {doc['run_id']} --store {tmp_path / 'store'} --json"
    done = subprocess.run(
        ["unshare", "--net", "sh", "-c", replay],
        capture_output=True,
        text=True,
        timeout=900,
        env={
            **os.environ,
            "DOCKER_HOST": "unix:///nonexistent/docker.sock",
            "REPLAYKIT_AGENTS_PATH": mini_path,
        },
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["identical"], report["divergence"]
