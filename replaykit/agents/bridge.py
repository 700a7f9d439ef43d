"""The recording bridge: an outside agent's only way to its model and to the task's environment.

Per episode, a loopback HTTP server (``127.0.0.1``, a free port, a random bearer token that is
handed to the agent's process in its environment and never stored) speaks OpenAI chat completions
and runs commands:

- ``POST /v1/chat/completions`` is forwarded to the episode's recorded client (``llm``), so each
  call is recorded, reused and replayed exactly like a harness's (in a replay nothing reaches the
  network or an engine). **The run owns** ``model`` (the config's, a fork's parent's before its
  step), ``temperature``, ``seed`` (derived per call from run seed, task and call number) and the
  config's ``model.params``: what the agent sends for those is replaced. Everything else the agent
  sends (``messages``, ``stop``, ``tools``, ``max_tokens`` when ``model.params`` does not set it,
  ...) **passes through**; ``stream: true`` is refused (400). The answer is the upstream's bytes.
- ``GET /v1/models`` lists the run's model (answered here: no model call).
- ``POST /exec`` ``{"command": ..., "timeout": s}`` runs the command in the task's environment
  (``env.run``): each one is a recorded env step (a replay needs no Docker); the answer is
  ``{"stdout", "stderr", "exit_code", "timed_out"}``.

Requests are served one at a time, in the order they arrive (an agent's calls are sequential).
Anything the episode raises while serving (a divergence, a framework limit, an endpoint failure)
answers the agent with a 502 and is kept as ``failure``: the harness re-raises it once the agent's
process has stopped, so the episode records it as it would for any harness.
"""

from __future__ import annotations

import json
import secrets
import threading
from typing import Any, Protocol

from replaykit.core.loopback import LoopbackHandler, LoopbackServer

#: request fields the run sets itself (besides the config's ``model.params``)
OWNED = ("model", "temperature", "seed")


class BadRequest(Exception):
    """A request the bridge refuses (400): the agent's mistake, not the episode's."""


class _Context(Protocol):
    model: str
    calls: int

    def model_of(self, call: int) -> str: ...

    def llm_kwargs(self) -> dict[str, Any]: ...


class Bridge:
    """``with Bridge(llm, env, ctx) as bridge:`` serves ``bridge.url`` until the block ends."""

    def __init__(self, llm: Any, env: Any, ctx: _Context) -> None:
        self.llm, self.env, self.ctx = llm, env, ctx
        self.token = secrets.token_urlsafe(24)
        self.failure: BaseException | None = None
        self.failed = threading.Event()  # set with ``failure``: the agent should be stopped
        self.lock = threading.Lock()
        self.model_calls = 0
        self.commands = 0
        self._server: LoopbackServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Bridge:
        handler = type("BridgeHandler", (_Handler,), {"bridge": self})
        self._server = LoopbackServer(("127.0.0.1", 0), handler).serve_in_thread("replaykit-bridge")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.stop_serving()

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        self.failed.set()

    def chat(self, body: dict[str, Any]) -> tuple[int, bytes]:
        """One chat completion through the recorded client: (status, the upstream's bytes)."""
        if body.get("stream"):
            return 400, _error("the replaykit bridge does not stream; send stream: false")
        messages = body.get("messages")
        if not isinstance(messages, list):
            return 400, _error("'messages' must be an array")
        passed = {k: v for k, v in body.items() if k not in (*OWNED, "messages", "stream")}
        owned = self.ctx.llm_kwargs()  # model, temperature, per-call seed, then model.params
        for key in owned:
            passed.pop(key, None)
        self.model_calls += 1
        raw = self.llm.chat.completions.with_raw_response.create(
            messages=messages, **owned, extra_body=passed or None
        )
        return raw.http_response.status_code, raw.http_response.content

    def models(self) -> bytes:
        name = self.ctx.model_of(self.ctx.calls)
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "replaykit"}]
        return json.dumps({"object": "list", "data": data}).encode()

    def run(self, body: dict[str, Any]) -> bytes:
        """One command in the task's environment (a recorded env step)."""
        command = body.get("command")
        if not isinstance(command, str):
            raise BadRequest("'command' must be a string")
        timeout = body.get("timeout")
        self.commands += 1
        obs = self.env.run(command, float(timeout) if isinstance(timeout, (int, float)) else None)
        doc = {"stdout": obs.stdout, "stderr": obs.stderr, "exit_code": obs.exit_code}
        return json.dumps({**doc, "timed_out": bool(getattr(obs, "timed_out", False))}).encode()


def _error(message: str, kind: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": None}}).encode()


class _Handler(LoopbackHandler):
    server_version = "replaykit-bridge"
    bridge: Bridge

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Authorization", "") != f"Bearer {self.bridge.token}":
            return self._send(401, _error("missing or wrong bearer token", "authentication_error"))
        path = self.path.split("?", 1)[0].rstrip("/")
        route = (method, path.removeprefix("/v1") if path.startswith("/v1/") else path)
        if route == ("GET", "/models"):
            return self._send(200, self.bridge.models())
        if route not in (("POST", "/chat/completions"), ("POST", "/exec")):
            return self._send(404, _error(f"no route {method} {self.path}", "not_found"))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self._send(400, _error("the body is not JSON"))
        if not isinstance(body, dict):
            return self._send(400, _error("the body must be a JSON object"))
        self._serve(route[1], body)

    def _serve(self, what: str, body: dict[str, Any]) -> None:
        bridge = self.bridge
        with bridge.lock:  # one at a time: the episode's events stay in the agent's order
            if bridge.failure is not None:
                return self._send(
                    502, _error(f"replaykit: the episode stopped: {bridge.failure}", "replaykit")
                )
            try:
                if what == "/exec":
                    status, payload = 200, bridge.run(body)
                else:
                    status, payload = bridge.chat(body)
            except BadRequest as exc:
                return self._send(400, _error(str(exc)))
            except BaseException as exc:  # the episode's to record: kept, re-raised by the harness
                bridge.fail(exc)
                return self._send(502, _error(f"replaykit: {type(exc).__name__}: {exc}", "replaykit"))
        self._send(status, payload)

    def _send(self, status: int, payload: bytes) -> None:
        self.send_bytes(status, payload)
