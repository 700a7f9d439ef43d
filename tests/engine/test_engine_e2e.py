"""End to end on a real engine: llama.cpp serving the tiny random-weight model.

The quickstart panel recorded against it (real tool calls under the function-calling
grammar, real environment steps), replayed with the server stopped; a 2-epoch
patch-queue training with it as the task model, replayed offline; certify
re-executing the recorded actions; the proxy in front of it (a stock openai client,
streamed) recording and replaying. Decoded greedily, the tiny model's tool calls are
``{"command": ""}`` (see replaykit.models.tiny_model): harmless in the local env.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from replaykit.cassette.events import EnvEvent, LlmEvent
from replaykit.cassette.store import Store
from replaykit.episodes.config_paths import TEMPLATES
from replaykit.models.reference.proposer import CURRICULUM, ENTRY, unified_diff
from replaykit.testing import REPO_ROOT
from replaykit.testing.llama_server import LlamaServer
from tests.cli_runner import cli

pytestmark = pytest.mark.engine  # a real llama.cpp server (tests/engine/conftest.py)


def run_json(*args: str) -> dict[str, Any]:
    proc = cli(*args, "--json", check=True)
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_quickstart_panel_on_the_real_engine_replays_identically_with_the_server_stopped(
    tiny_model: Path, engine_config: Callable[..., Path], tmp_path: Path
) -> None:
    with LlamaServer(tiny_model, n_ctx=2048, log_path=tmp_path / "server.log") as server:
        config = engine_config(server)
        run = run_json("run", str(config))
    assert run["recorded_count"] == len(run["episodes"]) == 16
    assert sum(e["steps"] for e in run["episodes"]) >= 1 and all(e["llm_calls"] >= 1 for e in run["episodes"])
    events = Store(tmp_path / "store", readonly=True).get_episode(run["cassettes"][0]).events
    replies = [json.loads(e.content) for e in events if isinstance(e, LlmEvent)]
    assert replies[0]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    assert replies[0]["usage"]["completion_tokens"] <= 32  # max_tokens from model.params was sent
    assert any(isinstance(e, EnvEvent) for e in events)
    store = Store(tmp_path / "store", readonly=True)
    actions = [
        e.action for c in run["cassettes"] for e in store.get_episode(c).events if isinstance(e, EnvEvent)
    ]
    assert actions and set(actions) == {""}  # greedy, the tiny model's commands are empty: harmless here
    # the server is gone: replay never needs it
    replay = run_json("replay", run["run_id"], "--store", str(tmp_path / "store"))
    assert replay["identical"] and replay["divergences"] == 0


def two_diffs() -> list[str]:
    """Two independent curriculum changes of the quickstart harness, as unified diffs."""
    source = (TEMPLATES / "quickstart" / "harness.py").read_text()
    changes = [c for c in CURRICULUM if c.path == ENTRY and c.search and source.count(c.search) == 1][:2]
    return [unified_diff(ENTRY, source, source.replace(c.search, c.replace)) for c in changes]


def test_patch_queue_training_on_the_real_engine_replays_offline_and_certifies(
    tiny_model: Path, engine_config: Callable[..., Path], tmp_path: Path
) -> None:
    (tmp_path / "patches").mkdir()
    for i, diff in enumerate(two_diffs()):
        (tmp_path / "patches" / f"{i}.diff").write_text(diff)
    store = str(tmp_path / "store")
    with LlamaServer(tiny_model, n_ctx=2048, log_path=tmp_path / "server.log") as server:
        config = engine_config(
            server,
            {
                "panel.tasks": [str(REPO_ROOT / "envs" / t) for t in ("hello-file", "fix-config-port")],
                "panel.seeds": [0],
                "train.epochs": 2,
                "train.estimator": {"kind": "patch_queue", "diffs": ["patches/0.diff", "patches/1.diff"]},
            },
        )
        trained = run_json("train", str(config))
    assert len(trained["epochs"]) == 2 and all(e["candidate_sha"] for e in trained["epochs"])
    # the server is gone: the whole training again, offline
    replay = run_json("replay", trained["training_id"], "--store", store)
    assert replay["identical"], replay
    assert [e["replayed_candidate_sha"] for e in replay["epochs"]] == [
        e["candidate_sha"] for e in trained["epochs"]
    ]
    assert [e["replayed_decision"] for e in replay["epochs"]] == [e["decision"] for e in trained["epochs"]]
    # certify re-executes the recorded (real) actions of the baseline run
    run_id = trained["epochs"][0]["baseline_run"]
    cert = run_json("certify", run_id, "--store", store)
    assert cert["tasks"] and all(t["status"] == "deterministic" for t in cert["tasks"]), cert


def test_proxy_in_front_of_the_real_engine_records_and_replays_a_streamed_session(
    tiny_model: Path, tmp_path: Path
) -> None:
    store = str(tmp_path / "store")
    messages = [{"role": "user", "content": "Say hello."}]

    def session(upstream: str | None, mode: str) -> tuple[dict[str, Any], list[str]]:
        argv = ["proxy", "--name", "llama-session", "--store", store, "--record-mode", mode, "--json"]
        argv += ["--upstream", upstream] if upstream else []
        argv += ["--api-key-env", ""]
        proc = subprocess.Popen(
            [sys.executable, "-m", "replaykit.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "400"},
        )
        try:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            found = re.search(r"(http://\S+/v1)", line)
            assert found, line + proc.stderr.read()  # type: ignore[union-attr]
            client: Any = openai.OpenAI(base_url=found.group(1), api_key="sk-no-key-required", max_retries=0)
            stream = client.chat.completions.create(
                model="tiny",
                messages=messages,
                max_tokens=12,
                temperature=0,
                stream=True,
            )
            pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
        assert proc.returncode == 0, err
        return json.loads(out), pieces

    with LlamaServer(tiny_model, n_ctx=2048, log_path=tmp_path / "server.log") as server:
        recorded, live = session(server.base_url, "once")
    assert recorded["mode"] == "record" and recorded["llm_calls"] == 1 and len(live) > 1
    replayed, again = session(None, "none")  # the server is gone: only the cassette answers
    assert replayed["mode"] == "replay" and replayed["identical"] and again == live
