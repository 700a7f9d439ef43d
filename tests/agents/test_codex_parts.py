"""The codex agent's parts in-process: the MCP exec server's protocol, the throwaway config that
confines Codex, and the bridge (its token, its exec route, a limit met inside a route)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from replaykit.agents import mcp_exec
from replaykit.agents.codex import driver
from replaykit.agents.codex.bridge import CodexBridge, offers_run_tool, one_call_a_turn
from replaykit.agents.wire import ExecAnswer, RpcRequest
from replaykit.envs.results import Observation

pytestmark = pytest.mark.unit

TEMPLATE = Path(driver.__file__).parent / "template" / "harness.py"


class FakeEnv:
    def __init__(self, fail_at: int | None = None) -> None:
        self.commands: list[str] = []
        self.fail_at = fail_at

    def run(self, command: str, timeout_sec: float | None = None) -> Observation:
        if self.fail_at is not None and len(self.commands) == self.fail_at:
            raise KeyboardInterrupt("a limit")  # a BaseException, as EpisodeLimit is
        self.commands.append(command)
        return Observation(f"ran {command}\n", "", 3 if "fail" in command else 0)


def rpc(server: mcp_exec.McpExecServer, method: str, params: dict[str, Any] | None = None) -> Any:
    message = RpcRequest.model_validate({"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {}})
    reply = server.handle(message)
    assert reply is not None
    return reply.model_dump(mode="json")


def test_the_mcp_server_speaks_the_stdio_protocol() -> None:
    ran: list[str] = []

    def run(command: str) -> ExecAnswer:
        ran.append(command)
        return ExecAnswer(stdout="x\n", stderr="", exit_code=0)

    server = mcp_exec.McpExecServer(run)
    init = rpc(server, "initialize", {"protocolVersion": "2025-06-18"})["result"]
    assert init["protocolVersion"] == "2025-06-18" and "tools" in init["capabilities"]
    assert server.handle(RpcRequest(method="notifications/initialized")) is None
    (tool,) = rpc(server, "tools/list")["result"]["tools"]
    assert tool["name"] == "run" and tool["inputSchema"]["required"] == ["command"]
    assert rpc(server, "resources/list")["result"] == {"resources": []}
    result = rpc(server, "tools/call", {"name": "run", "arguments": {"command": "ls"}})["result"]
    assert ran == ["ls"] and result["isError"] is False
    assert result["content"][0]["text"] == "exit_code: 0\nstdout:\nx\n\nstderr:\n"
    assert rpc(server, "tools/call", {"name": "run", "arguments": {"command": " "}})["result"]["isError"]
    assert rpc(server, "tools/call", {"name": "shell", "arguments": {}})["error"]["code"] == -32602
    assert rpc(server, "sampling/createMessage")["error"]["code"] == -32601
    assert ran == ["ls"]  # refused calls ran nothing


def test_the_mcp_server_over_stdio_answers_only_json_rpc() -> None:
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        "not json",
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    out = io.StringIO()
    lines += [json.dumps([1, 2]), json.dumps({"jsonrpc": "2.0", "id": 2, "method": 3})]
    never = ExecAnswer(stdout="", stderr="", exit_code=0)
    mcp_exec.serve(mcp_exec.McpExecServer(lambda c: never), io.StringIO("\n".join(lines) + "\n"), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [a.get("id") for a in answers] == [1, None, None, None]
    assert answers[0]["result"]["tools"][0]["name"] == "run"
    assert [a["error"]["code"] for a in answers[1:]] == [-32700, -32600, -32600]


def test_the_mcp_server_without_its_bridge_is_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "replaykit.agents.mcp_exec"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1
    assert mcp_exec.URL_VAR in proc.stderr


def post(url: str, body: object, token: str | None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_bridge_runs_commands_in_the_env_only_with_its_token() -> None:
    env = FakeEnv()
    with CodexBridge(env, llm=None) as bridge:
        bridge.gate.admit(os.getpid())  # this test plays the agent
        assert post(bridge.exec_url, {"command": "ls"}, None)[0] == 401
        assert post(bridge.exec_url, {"command": "ls"}, "guess")[0] == 401
        assert post(bridge.exec_url, {"cmd": "ls"}, bridge.token)[0] == 400
        status, answer = post(bridge.exec_url, {"command": "fail now"}, bridge.token)
        run = mcp_exec.bridge_exec(bridge.exec_url, bridge.token)
        assert run("echo hi") == ExecAnswer(stdout="ran echo hi\n", stderr="", exit_code=0)
    assert status == 200
    assert answer == {"stdout": "ran fail now\n", "stderr": "", "exit_code": 3, "timed_out": False}
    assert env.commands == ["fail now", "echo hi"]


def test_a_limit_met_in_a_route_stops_the_agent_and_is_raised_in_the_harness() -> None:
    stopped: list[bool] = []
    env = FakeEnv(fail_at=1)
    with CodexBridge(env, llm=None, on_stop=lambda: stopped.append(True)) as bridge:
        bridge.gate.admit(os.getpid())  # this test plays the agent
        assert post(bridge.exec_url, {"command": "a"}, bridge.token)[0] == 200
        assert post(bridge.exec_url, {"command": "b"}, bridge.token)[0] == 409
        assert post(bridge.exec_url, {"command": "c"}, bridge.token)[0] == 409  # nothing runs after it
        with pytest.raises(KeyboardInterrupt, match="a limit"):
            bridge.raise_stop()
    assert stopped == [True] and env.commands == ["a"]


def test_the_config_turns_codex_own_tools_off_and_routes_through_the_bridge() -> None:
    with CodexBridge(FakeEnv(), llm=None) as bridge:
        bridge.gate.admit(os.getpid())  # this test plays the agent
        config = tomllib.loads(driver.config_toml("m", bridge, 90, {"model_reasoning_effort": "low"}))
    assert config["sandbox_mode"] == "read-only" and config["approval_policy"] == "never"
    assert config["features"] == dict.fromkeys(driver.FEATURES_OFF, False)
    assert {"shell_tool", "unified_exec"} <= set(config["features"])
    provider = config["model_providers"][driver.PROVIDER_ID]
    assert provider["base_url"] == bridge.base_url and provider["wire_api"] == "responses"
    assert provider["request_max_retries"] == provider["stream_max_retries"] == 0
    server = config["mcp_servers"][mcp_exec.SERVER_NAME]
    assert server["args"] == ["-m", "replaykit.agents.mcp_exec"] and server["tool_timeout_sec"] == 90
    assert server["default_tools_approval_mode"] == "approve"
    assert server["env"] == {mcp_exec.URL_VAR: bridge.exec_url, mcp_exec.TOKEN_VAR: bridge.token}
    assert config["model_reasoning_effort"] == "low"
    env = driver.codex_environment(Path("/tmp/h/codex-home"), bridge.token)
    assert env["CODEX_HOME"] == "/tmp/h/codex-home" and env[driver.KEY_ENV] == bridge.token
    assert env["TZ"] == "UTC" and not any(k.startswith("OPENAI_") for k in env)


def test_a_failure_line_names_no_port() -> None:
    lines = [
        {"type": "turn.failed", "error": {"message": "unexpected status 500: http://127.0.0.1:4711/v1\nmore"}}
    ]
    events = driver.parse_events("\n".join([json.dumps(line) for line in lines] + ["not an event", "[]"]))
    assert len(events) == 1
    assert driver.failure(events, 1, "http://127.0.0.1:4711") == (
        "codex exec failed (exit 1): unexpected status 500: <bridge>/v1"
    )
    assert driver.failure([], 2, "x") == "codex exec failed (exit 2)"


def test_the_template_pins_the_driven_codex_version() -> None:
    assert f'CODEX_VERSION = "{driver.CODEX_VERSION}"' in TEMPLATE.read_text()
    setup = (Path(__file__).resolve().parents[2] / "scripts" / "setup-codex.sh").read_text()
    assert f'CODEX_VERSION="{driver.CODEX_VERSION}"' in setup


def test_requests_ask_for_one_call_a_turn() -> None:
    body = json.dumps({"model": "m", "parallel_tool_calls": True, "input": "é"}, ensure_ascii=False).encode()
    assert json.loads(one_call_a_turn(body)) == {"model": "m", "parallel_tool_calls": False, "input": "é"}
    for untouched in (b"not json", b"[1]", json.dumps({"model": "m"}).encode()):
        assert one_call_a_turn(untouched) == untouched


class CountingLlm:
    """The episode's client as the Codex bridge calls it (``llm.post``): counts what reached it."""

    def __init__(self) -> None:
        self.posted: list[bytes] = []

    def post(self, path: str, cast_to: Any, content: bytes, options: Any) -> Any:
        self.posted.append(content)
        return type("Answer", (), {"status_code": 200, "headers": {}, "content": b"{}"})()


TOOL = {"type": "namespace", "name": "mcp__replaykit", "tools": [{"type": "function", "name": "run"}]}


def test_a_first_request_without_replaykits_tool_is_infra_and_never_sent() -> None:
    """issue 38 item 6: Codex went on without its MCP server; the episode recorded a result."""
    assert offers_run_tool(json.dumps({"tools": [TOOL]}).encode())
    assert offers_run_tool(
        json.dumps({"tools": [{"type": "function", "name": "mcp__replaykit__run"}]}).encode()
    )
    assert not offers_run_tool(
        json.dumps({"tools": [{"type": "function", "name": "list_mcp_resources"}]}).encode()
    )
    stopped: list[bool] = []
    llm = CountingLlm()
    with CodexBridge(FakeEnv(), llm, on_stop=lambda: stopped.append(True)) as bridge:
        bridge.gate.admit(os.getpid())  # this test plays the agent
        status, _ = post(f"{bridge.base_url}/responses", {"input": [], "tools": []}, bridge.token)
        assert status == 503 and stopped == [True] and llm.posted == []
        assert bridge.infra is not None and "without replaykit's tool (mcp__replaykit)" in bridge.infra
        assert post(f"{bridge.base_url}/responses", {"input": [], "tools": [TOOL]}, bridge.token)[0] == 503
    with CodexBridge(FakeEnv(), llm) as bridge:
        bridge.gate.admit(os.getpid())
        assert post(f"{bridge.base_url}/responses", {"input": [], "tools": [TOOL]}, bridge.token)[0] == 200
        assert bridge.infra is None and len(llm.posted) == 1
