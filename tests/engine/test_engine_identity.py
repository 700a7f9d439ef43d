"""The engine's identity is measured, not declared: restarting the server with another
--n_ctx never reuses the cassettes recorded under the old one silently."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replaykit.models.engines import free_port
from replaykit.testing import REPO_ROOT
from replaykit.testing.llama_server import LlamaServer
from tests.cli_runner import cli

pytestmark = pytest.mark.engine  # a real llama.cpp server (tests/engine/conftest.py)


def test_restart_with_another_n_ctx_stops_reuse_with_one_line_naming_it(
    tiny_model: Path, engine_config: Callable[..., Path], tmp_path: Path
) -> None:
    port = free_port()
    small = {"panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")], "panel.seeds": [0, 1]}
    with LlamaServer(tiny_model, n_ctx=2048, port=port, log_path=tmp_path / "a.log") as server:
        config = engine_config(server, small)
        first = json.loads(cli("run", str(config), "--json", check=True).stdout)
    assert first["recorded_count"] == 2
    engine = first["engine"]
    assert {k: engine[k] for k in ("engine", "model", "n_ctx")} == {
        "engine": "llama-cpp-python",
        "model": tiny_model.name,  # the alias it is served under
        "n_ctx": 2048,
    }
    assert len(engine["canary"]) == 16 and engine["canary_prompt_tokens"] > 0

    with LlamaServer(tiny_model, n_ctx=4096, port=port, log_path=tmp_path / "b.log"):  # same URL
        refused = cli("run", str(config))
        accepted = cli("run", str(config), "--accept-engine-change", "--json", check=True)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert "n_ctx 2048 → 4096" in line and "--accept-engine-change" in line and "--record-mode all" in line
    assert json.loads(accepted.stdout)["reused_count"] == 2

    with LlamaServer(tiny_model, n_ctx=2048, port=port, log_path=tmp_path / "c.log"):  # the same engine again
        again = json.loads(cli("run", str(config), "--json", check=True).stdout)
    assert again["reused_count"] == 2 and again["run_id"] == first["run_id"]

    stopped = cli("run", str(config), "--json", check=True)  # no engine: reused, and it says unchecked
    assert json.loads(stopped.stdout)["reused_count"] == 2
    said = [line for line in stopped.stderr.splitlines() if "engine identity not checked" in line]
    assert len(said) == 1 and "it did not answer" in said[0] and "2 cassette(s) reused" in said[0], (
        stopped.stderr
    )
    assert "engine identity not checked" not in cli("run", str(config), "--record-mode", "none").stderr


def probe(server: LlamaServer, *args: str) -> tuple[int, dict[str, Any]]:
    proc = cli(
        "probe", "--base-url", server.base_url, "--model", server.model, "--api-key-env", "", *args, "--json"
    )
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_probe_on_the_function_calling_format_finds_the_seed_not_honoured_and_greedy_deterministic(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    common = ("-n", "3", "--concurrency", "1", "--max-tokens", "8", "--seed", "7")
    code, sampled = probe(
        llama_server, "--temperature", "1", *common, "--save", "--store", str(tmp_path / "s")
    )
    assert code == 1 and sampled["classification"] == "seed_not_honoured"
    assert sampled["distinct_serial"] > 1 and sampled["request"]["max_tokens"] == 8
    assert sampled["engine"]["engine"] == "llama-cpp-python"
    assert any("drops `seed`" in tip for tip in sampled["advice"])
    code, greedy = probe(llama_server, "--temperature", "0", *common)
    assert code == 0 and greedy["classification"] == "deterministic" and greedy["verdict"] == "deterministic"


def test_run_warns_or_refuses_after_a_probe_of_this_engine_was_not_deterministic(
    llama_server: LlamaServer, engine_config: Callable[..., Path], tmp_path: Path
) -> None:
    store = str(tmp_path / "store")
    code, sampled = probe(
        llama_server,
        "--temperature",
        "1",
        "-n",
        "2",
        "--concurrency",
        "1",
        "--max-tokens",
        "4",
        "--save",
        "--store",
        store,
    )
    assert code == 1 and sampled["classification"] == "seed_not_honoured"
    # tool_choice none: replies are messages, never actions (sampled commands of a random model are not run)
    values = {
        "model.temperature": 1.0,
        "model.params": {"max_tokens": 4, "tool_choice": "none"},
        "harness.params.max_steps": 1,
        "panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")],
        "panel.seeds": [0],
    }
    refused = cli(
        "run",
        str(engine_config(llama_server, {**values, "model.require_deterministic": True}, name="strict.yaml")),
    )
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert sampled["probe_id"] in refused.stderr and "seed not honoured" in refused.stderr
    warned = cli("run", str(engine_config(llama_server, values)), "--json", check=True)
    assert "warning: probe " + sampled["probe_id"] in warned.stderr and "seed not honoured" in warned.stderr
    greedy = cli(
        "run",
        str(engine_config(llama_server, {**values, "model.temperature": 0.0}, name="greedy.yaml")),
        "--json",
        check=True,
    )
    assert "warning" not in greedy.stderr  # no probe at this temperature
