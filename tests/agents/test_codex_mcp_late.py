"""Codex starts only when its tool is there (issue 38 item 6): replaykit's MCP server started late
on purpose (``REPLAYKIT_MCP_LATE_S``). Codex waits for it (the server is ``required``, bounded by
its startup timeout) and its first request offers the tool; past the bound the episode is one
infra line, never a result recorded without its only tool (before: a no_valid_action episode of
one model call, its request without ``mcp__replaykit``). Local tasks: no Docker needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replaykit.agents.codex.driver import MCP_STARTUP_VAR
from replaykit.agents.mcp_exec import LATE_VAR
from replaykit.cassette.stores import open_store
from tests.agents.test_codex_agent import codex_cli
from tests.cli_runner import cli

pytestmark = [pytest.mark.e2e, pytest.mark.codex]
REPO = Path(__file__).resolve().parents[2]


def config(folder: Path) -> Path:
    path = folder / "late.yaml"
    path.write_text(
        "name: late\nstore: ./store\nmodel: {name: reference-oracle, base_url: builtin}\n"
        f"panel: {{tasks: [{json.dumps(str(REPO / 'envs' / 'hello-file'))}], seeds: [0]}}\n"
        "env: {kind: local, timeout_sec: 60}\n"
    )
    return path


def run(folder: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = cli("run", str(config(folder)), "--agent", "codex", "--json", cwd=folder, env=env, process=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def first_request_tools(folder: Path, cassette: str) -> list[str]:
    episode = open_store(str(folder / "store"), readonly=True).get_episode(cassette)
    first = episode.llm_events[0].body
    return [str(t.get("name")) for t in first.get("tools", [])]


def test_a_late_tool_server_is_waited_for(tmp_path: Path) -> None:
    codex_cli()
    report = run(tmp_path, {LATE_VAR: "8"})
    (episode,) = report["episodes"]
    assert episode["outcome"] == "solved" and episode["steps"] >= 1, episode
    assert "mcp__replaykit" in first_request_tools(tmp_path, episode["cassette_id"])


def test_a_tool_server_past_its_bound_is_one_infra_line(tmp_path: Path) -> None:
    codex_cli()
    report = run(tmp_path, {LATE_VAR: "30", MCP_STARTUP_VAR: "3"})
    (episode,) = report["episodes"]
    assert episode["outcome"] == "infra" and episode["llm_calls"] == 0 and episode["steps"] == 0, episode
    store = open_store(str(tmp_path / "store"), readonly=True)
    grade = store.get_episode(episode["cassette_id"]).grade
    assert grade is not None and grade.infra_failure
    assert grade.detail.endswith("codex: replaykit's MCP tool server did not answer Codex within 3 s"), (
        grade.detail
    )
