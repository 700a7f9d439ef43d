"""``replaykit engine start`` on llama.cpp's own llama-server with SmolLM2, as a user runs it:
the base URL and model id printed, tool results that reach the model (prompt tokens grow
with them), Ctrl-C exits 130 with the engine gone; an engine that dies mid-run is one
infra line with nothing graded."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest

from replaykit.models.engines import free_port
from replaykit.testing.llama_server import LlamaServer
from tests.engine.asker import asker_config

pytestmark = pytest.mark.engine  # real llama.cpp engines (tests/engine/conftest.py)

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run one bash command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def prompt_tokens(client: Any, model: str, result: str) -> int:
    """The prompt tokens of a conversation whose one tool call (ls) returned ``result``."""
    messages = [
        {"role": "system", "content": "You are a shell agent."},
        {"role": "user", "content": "How many files are there?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]
    reply = client.chat.completions.create(
        model=model, messages=messages, tools=[BASH], max_tokens=1, temperature=0
    )
    return int(reply.usage.prompt_tokens)


def started(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The JSON document ``engine start --json`` prints once the engine answers."""
    assert proc.stdout is not None
    text = ""
    while True:
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        text += line
        if line.startswith("}"):
            doc: dict[str, Any] = json.loads(text)
            return doc


@pytest.mark.usefixtures("llama_server_engine")
def test_engine_start_serves_smollm2_whose_tool_results_reach_it_and_ctrl_c_exits_130(
    smollm2: Path, tmp_path: Path
) -> None:
    port = free_port()
    argv = ["engine", "start", "--model", str(smollm2), "--port", str(port), "--json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "replaykit.cli", *argv, "--log", str(tmp_path / "engine.log")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        info = started(proc)
        assert info["base_url"] == f"http://127.0.0.1:{port}/v1" and info["engine"] == "llama-server"
        assert info["model"] == smollm2.name and info["model_path"] == str(smollm2)
        client = openai.OpenAI(base_url=info["base_url"], api_key="none", max_retries=0)
        two = prompt_tokens(client, info["model"], "a.txt\nb.txt")
        many = prompt_tokens(client, info["model"], "\n".join(f"file_{i:03d}.txt" for i in range(300)))
        assert many - two >= 300, (two, many)  # the tool result is in the prompt: every name counts
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    with pytest.raises(ProcessLookupError):
        os.kill(int(info["pid"]), 0)  # the engine went with it


def cassettes(store: Path) -> list[tuple[str, int]]:
    """(cassette id, infra_failure) of every stored episode (read-only, while a run writes)."""
    index = store / "index.db"
    if not index.exists():
        return []
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=5) as db:
        try:
            return list(db.execute("select id, infra_failure from cassettes"))
        except sqlite3.OperationalError:  # not created yet
            return []


def run_until_first_episode(
    config: Path, store: Path, then: Callable[[], object]
) -> subprocess.CompletedProcess[str]:
    """``replaykit run config`` in a process; ``then()`` once its first episode is stored."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "replaykit.cli", "run", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not cassettes(store) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    then()
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


SIX = [
    "hello-file",
    "fix-config-port",
    "count-error-lines",
    "csv-active-emails",
    "json-release-tag",
    "organize-files",
]


@pytest.mark.usefixtures("llama_server_engine")
def test_an_engine_that_dies_mid_run_is_one_infra_line_and_nothing_is_graded(
    smollm2: Path, engine_config: Callable[..., Path], tmp_path: Path
) -> None:
    make = asker_config(engine_config, tmp_path, SIX)
    server = LlamaServer(
        smollm2, n_ctx=2048, engine="llama-server", alias="smollm2", log_path=tmp_path / "s.log"
    )
    with server:
        config = make(server)
        done = run_until_first_episode(config, tmp_path / "store", server.stop)  # killed mid-run
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("Error")]  # beside the probe's note
    assert done.returncode == 1 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    line = errors[0]
    assert server.base_url in line and "is the server up" in line, line
    stored = cassettes(tmp_path / "store")
    assert 1 <= len(stored) < len(SIX) and all(infra == 0 for _, infra in stored)  # the dead calls: not kept
