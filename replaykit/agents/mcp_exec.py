"""A stdio MCP server whose one tool, ``run(command)``, runs a command in the episode's environment.

An outside agent that speaks MCP (the Codex CLI, ``mcp_servers`` in its ``config.toml``) starts
``python -m replaykit.agents.mcp_exec``; each ``run`` call is posted to the episode bridge's exec
endpoint (``$REPLAYKIT_EXEC_URL``, with the bearer ``$REPLAYKIT_EXEC_TOKEN``), which runs it as
the harness's ``env.run``: a recorded environment step, in the task's container while recording,
served from the cassette while replaying. So the agent acts only through the environment, and its
every action is an ``env`` event.

The protocol is MCP's stdio transport (newline-delimited JSON-RPC 2.0): ``initialize``,
``tools/list``, ``tools/call``, and empty ``resources/list`` / ``resources/templates/list`` (Codex
offers its model MCP-resource tools beside the server's own). A command's result is one text block,
``exit_code: N`` then its stdout and stderr: what a model, and the reference simulator, read.
Nothing but JSON-RPC goes to stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import IO

from pydantic import JsonValue, ValidationError

from replaykit.agents.wire import (
    ExecAnswer,
    ExecRequest,
    RpcError,
    RpcErrorBody,
    RpcId,
    RpcRequest,
    RpcResult,
    TextContent,
    ToolResult,
    answer,
)

SERVER_NAME = "replaykit"
TOOL_NAME = "run"
URL_VAR = "REPLAYKIT_EXEC_URL"
TOKEN_VAR = "REPLAYKIT_EXEC_TOKEN"
LATE_VAR = "REPLAYKIT_MCP_LATE_S"  # seconds the server waits before it answers (tests only)
PROTOCOL_VERSION = "2025-06-18"  # what Codex 0.171 asks for; a client's own version is echoed back
RUN_TOOL: dict[str, JsonValue] = {
    "name": TOOL_NAME,
    "description": (
        "Run a shell command (bash) in the task's environment, in its working directory, and return "
        "its exit code, stdout and stderr. This is the only way to look at or change the task's files."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "the bash command line to run"}},
        "required": ["command"],
        "additionalProperties": False,
    },
}

Exec = Callable[[str], ExecAnswer]
Answer = RpcResult | RpcError


def format_result(result: ExecAnswer) -> str:
    """An observation as the tool's text: exit code first, then stdout and stderr."""
    return f"exit_code: {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


def bridge_exec(url: str, token: str, timeout_s: float = 3600.0) -> Exec:
    """``run`` through the bridge: POST an ``ExecRequest``, read its ``ExecAnswer``."""

    def run(command: str) -> ExecAnswer:
        request = urllib.request.Request(
            url,
            data=answer(ExecRequest(command=command)),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(
                f"the episode refused the command: {exc.read().decode(errors='replace')}"
            ) from None
        try:
            return ExecAnswer.model_validate_json(body)
        except ValidationError:
            raise RuntimeError(f"the episode's exec endpoint answered no observation: {body!r}") from None

    return run


class McpExecServer:
    """The JSON-RPC side: one message in, at most one message out."""

    def __init__(self, run: Exec, on_listed: Callable[[], None] | None = None) -> None:
        self.run, self.on_listed = run, on_listed

    def handle(self, message: RpcRequest) -> Answer | None:
        if message.notification:  # ``notifications/initialized``, cancellations
            return None
        try:
            result = self._result(message.method, message.params or {})
        except LookupError:
            return _error(message.id, -32601, f"method not found: {message.method}")
        except ValueError as exc:
            return _error(message.id, -32602, str(exc))
        return RpcResult(id=message.id, result=result)

    def _result(self, method: str, params: dict[str, JsonValue]) -> dict[str, JsonValue]:
        if method == "initialize":
            version = params.get("protocolVersion") or PROTOCOL_VERSION
            return {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": SERVER_NAME, "version": "1"},
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            if self.on_listed is not None:  # the handshake is done: Codex offers the tool from now on
                self.on_listed()
            return {"tools": [RUN_TOOL]}
        if method == "resources/list":
            return {"resources": []}
        if method == "resources/templates/list":
            return {"resourceTemplates": []}
        if method == "tools/call":
            return self._call(params).model_dump()
        raise LookupError(method)

    def _call(self, params: dict[str, JsonValue]) -> ToolResult:
        arguments = params.get("arguments") or {}
        if params.get("name") != TOOL_NAME:
            raise ValueError(f"unknown tool {params.get('name')!r}; the only tool is {TOOL_NAME!r}")
        command = arguments.get("command") if isinstance(arguments, dict) else None
        if not isinstance(command, str) or not command.strip():
            return _text("the `command` argument must be a non-empty string", error=True)
        try:
            observation = self.run(command)
        except Exception as exc:  # the bridge said no (a limit reached, the episode over): tell the agent
            return _text(f"[replaykit] the command was not run: {exc}", error=True)
        return _text(format_result(observation), error=False)


def _text(text: str, error: bool) -> ToolResult:
    return ToolResult(content=[TextContent(text=text)], isError=error)


def _error(id_: RpcId, code: int, message: str) -> RpcError:
    return RpcError(id=id_, error=RpcErrorBody(code=code, message=message))


def read_message(line: str) -> RpcRequest | RpcError:
    """One line as a request, or the error that answers it (unparsable, not a request)."""
    try:
        return RpcRequest.model_validate_json(line)
    except ValidationError as exc:
        parse_error = exc.errors()[0]["type"] == "json_invalid"
        return _error(None, -32700, "parse error") if parse_error else _error(None, -32600, "invalid request")


def serve(server: McpExecServer, stdin: IO[str], stdout: IO[str]) -> None:
    """Read newline-delimited JSON-RPC from ``stdin`` until it closes; answer on ``stdout``."""
    for line in stdin:
        if not line.strip():
            continue
        message = read_message(line)
        reply = server.handle(message) if isinstance(message, RpcRequest) else message
        if reply is not None:
            stdout.write(json.dumps(reply.model_dump(mode="json")) + "\n")  # ASCII: any locale
            stdout.flush()


def main() -> int:
    url, token = os.environ.get(URL_VAR), os.environ.get(TOKEN_VAR, "")
    late = os.environ.get(LATE_VAR)
    if late:  # a test's: the server starting late, as it did under load
        time.sleep(float(late))
    if not url:
        print(
            f"replaykit.agents.mcp_exec: ${URL_VAR} is not set (the episode bridge's exec URL)",
            file=sys.stderr,
        )
        return 2
    serve(McpExecServer(bridge_exec(url, token), lambda: ready(url, token)), sys.stdin, sys.stdout)
    return 0


def ready(exec_url: str, token: str) -> None:
    """Tell the bridge Codex listed the tool (``/ready`` beside ``/exec``); a bridge that is gone
    is no reason to fail the handshake."""
    url = exec_url.rsplit("/", 1)[0] + "/ready"
    request = urllib.request.Request(
        url, data=b"{}", headers={"Authorization": f"Bearer {token}"}, method="POST"
    )
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except (urllib.error.URLError, OSError):
        pass


if __name__ == "__main__":
    sys.exit(main())
