"""configs/real-model.yaml on the real model: SmolLM2 on llama-server, its commands run in
Docker containers. A 2-epoch patch-queue training records real environment steps whose output
reaches the model (the shell-text harness sends it back as a user message, which SmolLM2's
template renders: its prompt grows by it), and the whole training replays identically offline
with the engine stopped. Two of its tasks, one seed: the tier's time; the whole config is the
README's live training."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import REPO_ROOT, write_config
from replaykit.testing.llama_server import LlamaServer
from tests.cli_runner import cli

pytestmark = [pytest.mark.engine, pytest.mark.docker]  # a real engine and Docker

TASKS = ["touch-file", "count-files"]  # one SmolLM2 solves at seed 0, one it does not
PATCHES = ("01-task-format.diff", "02-truncate.diff", "03-retry-empty.diff")


def prompt_tokens(event: dict[str, Any]) -> int:
    return int(json.loads(event["response"]["body"])["usage"]["prompt_tokens"])


def observations_reach_the_model(events: list[dict[str, Any]]) -> int:
    """How many commands' output the next request carried (and grew the prompt by)."""
    seen = 0
    for i, step in enumerate(events):
        later = [e for e in events[i + 1 :] if e["kind"] == "llm"]
        before = [e for e in events[:i] if e["kind"] == "llm"]
        if step["kind"] != "env" or not later or not before or not step["stdout"].strip():
            continue
        sent = json.loads(later[0]["request"]["body"])["messages"][-1]
        assert sent["role"] == "user" and step["stdout"].strip() in sent["content"], sent
        assert prompt_tokens(later[0]) > prompt_tokens(before[-1]) + len(step["stdout"].split()), step
        seen += 1
    return seen


def test_real_model_training_records_steps_and_replays_with_the_engine_stopped(
    smol_server: LlamaServer, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path,
        {
            "model.base_url": smol_server.base_url,
            "panel.tasks": [str(REPO_ROOT / "configs" / "real-model" / "tasks" / t) for t in TASKS],
            "panel.seeds": [0],
            "train.estimator.diffs": [
                str(REPO_ROOT / "configs" / "real-model" / "patches" / p) for p in PATCHES
            ],
        },
        base="real-model.yaml",
    )
    trained: dict[str, Any] = json.loads(
        cli("train", str(config), "--epochs", "2", "--json", check=True).stdout
    )
    assert len(trained["epochs"]) == 2 and trained["task_model_calls"] >= 2
    store = str(tmp_path / "store")
    listed = json.loads(cli("cassettes", "ls", "--store", store, "--json", check=True).stdout)
    assert sum(int(c["n_env"]) for c in listed) >= 1, listed  # real commands ran, in containers
    shown = [
        json.loads(cli("cassettes", "show", c["id"], "--store", store, "--json", check=True).stdout)
        for c in listed
        if c["n_env"] and c["n_llm"] >= 2
    ]
    assert sum(observations_reach_the_model(s["events"]) for s in shown) >= 1
    smol_server.stop()  # the engine is gone: the whole training again, offline
    replay = json.loads(
        cli("replay", trained["training_id"], "--config", str(config), "--json", check=True).stdout
    )
    assert replay["identical"], replay
    assert [e["replayed_decision"] for e in replay["epochs"]] == [e["decision"] for e in trained["epochs"]]
