"""The loopback bridge between a Codex CLI process and its episode.

Two routes, one episode:

- ``POST /v1/responses``: Codex's Responses request, its body as sent (but for
  ``parallel_tool_calls: false``, :func:`one_call_a_turn`), posted through the
  episode's ``llm`` client (so the episode cassette records it, or serves it while replaying,
  like any harness call: the ``codex-session`` rules normalise what Codex makes volatile), and
  the answer relayed as received (status, content type, bytes).
- ``POST /exec``: ``{"command": …}`` from ``replaykit.agents.mcp_exec`` (Codex's only tool), run
  as ``env.run``: a recorded environment step, in the task's container while recording and
  served from the cassette while replaying. Calls are run one at a time, in arrival order.

Only loopback, only its agent (``gate.py``: the bridge's bearer token, a random per-episode value
stored nowhere; connections Codex or its MCP server opened while Codex runs; a bounded body).
A framework limit or a divergence raised by ``llm`` or ``env`` stops the agent (``on_stop``) and
is re-raised by :meth:`CodexBridge.raise_stop` in the harness's own thread, where the episode
records it. The MCP server says when it answered Codex's ``tools/list`` (``POST /ready``); a first
request that does not offer its ``run`` tool is not forwarded: the agent is stopped and the episode
is an infrastructure failure (``infra``), never a result recorded without its only tool.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from replaykit.agents.bridge import Actuator
from replaykit.agents.gate import AgentGate, Refused
from replaykit.agents.mcp_exec import SERVER_NAME, TOOL_NAME
from replaykit.agents.wire import (
    BadRequest,
    ExecAnswer,
    ExecRefusal,
    ExecRequest,
    answer,
    error_answer,
    parse,
)
from replaykit.core.errors import HarnessError
from replaykit.core.loopback import LoopbackHandler, LoopbackServer


def one_call_a_turn(body: bytes) -> bytes:
    """The request with ``parallel_tool_calls: false``: Codex runs the calls of one reply at the
    same time and in no fixed order (measured on 0.171: three calls of one reply reached the MCP
    server as c0 c1 c2, c2 c0 c1, ... run to run), so a reply of several calls would record its
    commands in an order a replay does not repeat; one call a reply keeps them in order."""
    try:
        request = json.loads(body)
    except ValueError:
        return body
    if not isinstance(request, dict) or request.get("parallel_tool_calls") is not True:
        return body
    return json.dumps({**request, "parallel_tool_calls": False}, ensure_ascii=False).encode()


def offers_run_tool(body: bytes) -> bool:
    """Whether a Responses request offers the model replaykit's MCP tool (``mcp__replaykit``'s
    ``run``, as Codex namespaces an MCP server's tools)."""
    try:
        tools = json.loads(body).get("tools") or []
    except (ValueError, AttributeError):
        return False
    namespace = f"mcp__{SERVER_NAME}"
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("name") == f"{namespace}__{TOOL_NAME}":
            return True
        inner = tool.get("tools") if tool.get("name") == namespace else None
        if isinstance(inner, list) and any(isinstance(t, dict) and t.get("name") == TOOL_NAME for t in inner):
            return True
    return False


class _Handler(LoopbackHandler):
    server: _Server
    server_version = "replaykit-codex-bridge"

    def _dispatch(self, method: str) -> None:
        bridge = self.server.bridge
        try:  # token, the agent's own connection, a sane length: before a byte of the body
            body = bridge.gate.body(self)
        except Refused as exc:
            return self._send(exc.status, error_answer(str(exc), "authentication_error"))
        if method != "POST":
            return self._send(404, b'{"error": {"message": "unknown path"}}')
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/responses":
            status, content_type, data = bridge.responses(body)
            return self._send(status, data, content_type)
        if path == "/ready":  # the MCP server answered Codex's tools/list: its tool is offered
            bridge.tools_ready.set()
            return self._send(200, b"{}")
        if path == "/exec":
            return self._send(*bridge.exec(body))
        self._send(404, b'{"error": {"message": "unknown path"}}')

    def _send(self, status: int, data: bytes, content_type: str = "application/json") -> None:
        self.send_bytes(status, data, content_type)


class _Server(LoopbackServer):  # keep-alive, no Nagle, silent when a client hangs up
    bridge: CodexBridge


class CodexBridge:
    """``with CodexBridge(env, llm) as bridge:`` serves ``bridge.base_url`` and ``bridge.exec_url``."""

    def __init__(self, env: Actuator, llm: Any, on_stop: Callable[[], None] | None = None) -> None:
        self.env, self.llm, self.on_stop = env, llm, on_stop
        self.gate = AgentGate()  # the token, the agent's process, the requests counted (gate.py)
        self.stopped: BaseException | None = None  # the first limit or divergence raised in a route
        self.tools_ready = threading.Event()  # replaykit's MCP server answered Codex's tools/list
        self.infra: str | None = None  # why the episode cannot be a result (its tool was not offered)
        self._first = True
        self._lock = threading.Lock()  # one model call or command at a time: the tape is in order
        self._server: _Server | None = None

    def __enter__(self) -> CodexBridge:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.bridge = self
        self._server.serve_in_thread("codex-bridge")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.stop_serving()

    @property
    def token(self) -> str:
        return self.gate.token

    @property
    def address(self) -> str:
        assert self._server is not None, "the bridge is not serving"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.address}/v1"

    @property
    def exec_url(self) -> str:
        return f"{self.address}/exec"

    def raise_stop(self) -> None:
        if self.stopped is not None:
            raise self.stopped

    def _stop(self, exc: BaseException) -> None:
        if self.stopped is None:
            self.stopped = exc
        if self.on_stop is not None:
            self.on_stop()

    # -- routes ----------------------------------------------------------------------
    def responses(self, body: bytes) -> tuple[int, str, bytes]:
        import httpx2  # what the openai client rides on
        import openai

        with self._lock:
            if self.stopped is None and self._first:
                self._first = False
                if not offers_run_tool(body):  # Codex went on without its MCP server: infra, never a result
                    self.infra = (
                        f"codex sent its first request without replaykit's tool (mcp__{SERVER_NAME}): its MCP "
                        "server had not answered; the episode is not a result"
                    )
                    self._stop(HarnessError(self.infra))
            if self.stopped is not None:
                return 503, "application/json", b'{"error": {"message": "the episode has stopped"}}'
            try:
                response = self.llm.post(
                    "/responses",
                    cast_to=httpx2.Response,  # the raw answer: status, headers, bytes
                    content=one_call_a_turn(self.gate.hide_bytes(body)),
                    options={"headers": {"Content-Type": "application/json"}},
                )
            except openai.APIStatusError as exc:  # relayed as is: the tape judges it (an infra failure)
                answer = exc.response
            except openai.APIConnectionError as exc:
                return 502, "application/json", json.dumps({"error": {"message": str(exc)}}).encode()
            except BaseException as exc:  # a limit reached, a divergence: the episode stops here
                self._stop(exc)
                return 503, "application/json", b'{"error": {"message": "the episode has stopped"}}'
            else:
                answer = response
            content_type = answer.headers.get("content-type", "application/json")
            return answer.status_code, content_type, answer.content

    def exec(self, body: bytes) -> tuple[int, bytes]:
        try:
            command = parse(ExecRequest, body).command
        except BadRequest:
            return 400, answer(ExecRefusal(error='the body must be {"command": "<a bash command line>"}'))
        with self._lock:
            if self.stopped is not None:
                return 409, answer(ExecRefusal(error="the episode has stopped"))
            try:
                obs = self.env.run(command)
            except BaseException as exc:  # a limit reached, a divergence: the episode stops here
                self._stop(exc)
                return 409, answer(ExecRefusal(error="the episode has stopped"))
        hide = self.gate.hide  # as the episode stores it: the agent never sends its token on
        done = ExecAnswer(
            stdout=hide(obs.stdout), stderr=hide(obs.stderr), exit_code=obs.exit_code, timed_out=obs.timed_out
        )
        return 200, answer(done)
