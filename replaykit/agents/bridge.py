"""The recording bridge: an outside agent's only way to its model and to the task's environment.

Per episode, a loopback HTTP server (``127.0.0.1``, a free port) speaks OpenAI chat completions
and runs commands, for the agent alone (``gate.py``: a random bearer token handed to the agent's
process and stored nowhere, connections its process opened while it runs, a bounded body):

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

import threading
from typing import Any, Protocol

from replaykit.agents.gate import AgentGate, Refused
from replaykit.agents.wire import (
    BadRequest,
    ChatRequest,
    ExecAnswer,
    ExecRequest,
    ModelCard,
    ModelList,
    answer,
    error_answer,
    parse,
)
from replaykit.core.loopback import LoopbackHandler, LoopbackServer
from replaykit.envs.results import Observation

#: request fields the run sets itself (besides the config's ``model.params``)
OWNED = ("model", "temperature", "seed")


class _Context(Protocol):
    model: str
    calls: int

    def model_of(self, call: int) -> str: ...

    def llm_kwargs(self) -> dict[str, object]: ...


class Actuator(Protocol):
    """What the bridge asks of the episode's environment: one recorded step."""

    def run(self, command: str, timeout_sec: float | None = None) -> Observation: ...


class Bridge:
    """``with Bridge(llm, env, ctx) as bridge:`` serves ``bridge.url`` until the block ends."""

    def __init__(self, llm: Any, env: Actuator, ctx: _Context) -> None:
        self.llm, self.env, self.ctx = llm, env, ctx
        self.gate = AgentGate()  # the token, the agent's process, the requests counted (gate.py)
        self.failure: BaseException | None = None
        self.failed = threading.Event()  # set with ``failure``: the agent should be stopped
        self.lock = threading.Lock()
        self.model_calls = 0
        self.commands = 0
        self._server: LoopbackServer | None = None

    @property
    def token(self) -> str:
        return self.gate.token

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
        try:
            with self.lock:  # a request in flight ends first: its event lands before the episode's last
                pass
        finally:
            self._server.stop_serving()

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        self.failed.set()

    def chat(self, raw: bytes) -> tuple[int, bytes]:
        """One chat completion through the recorded client: (status, the upstream's bytes)."""
        request = parse(ChatRequest, self.gate.hide_bytes(raw))
        if request.stream:
            return 400, error_answer("the replaykit bridge does not stream; send stream: false")
        owned = self.ctx.llm_kwargs()  # model, temperature, per-call seed, then model.params
        passed = request.passed((*OWNED, *owned))
        self.model_calls += 1
        raw_answer = self.llm.chat.completions.with_raw_response.create(
            messages=request.messages, **owned, extra_body=passed or None
        )
        return raw_answer.http_response.status_code, raw_answer.http_response.content

    def models(self) -> bytes:
        return answer(ModelList(data=[ModelCard(id=self.ctx.model_of(self.ctx.calls))]))

    def run(self, raw: bytes) -> bytes:
        """One command in the task's environment (a recorded env step)."""
        request = parse(ExecRequest, raw)
        self.commands += 1
        obs = self.env.run(request.command, request.timeout)
        hide = self.gate.hide  # as the episode stores it: the agent never sends its token on
        return answer(
            ExecAnswer(
                stdout=hide(obs.stdout),
                stderr=hide(obs.stderr),
                exit_code=obs.exit_code,
                timed_out=obs.timed_out,
            )
        )


class _Handler(LoopbackHandler):
    server_version = "replaykit-bridge"
    bridge: Bridge

    def _dispatch(self, method: str) -> None:
        try:  # token, the agent's own connection, a sane length: before a byte of the body
            raw = self.bridge.gate.body(self)
        except Refused as exc:
            kind = "authentication_error" if exc.status == 401 else "invalid_request_error"
            return self._send(exc.status, error_answer(str(exc), kind))
        path = self.path.split("?", 1)[0].rstrip("/")
        route = (method, path.removeprefix("/v1") if path.startswith("/v1/") else path)
        if route == ("GET", "/models"):
            return self._send(200, self.bridge.models())
        if route not in (("POST", "/chat/completions"), ("POST", "/exec")):
            return self._send(404, error_answer(f"no route {method} {self.path}", "not_found"))
        self._serve(route[1], raw)

    def _serve(self, what: str, body: bytes) -> None:
        bridge = self.bridge
        with bridge.lock:  # one at a time: the episode's events stay in the agent's order
            if bridge.failure is not None:
                return self._send(
                    502, error_answer(f"replaykit: the episode stopped: {bridge.failure}", "replaykit")
                )
            try:
                if what == "/exec":
                    status, payload = 200, bridge.run(body)
                else:
                    status, payload = bridge.chat(body)
            except BadRequest as exc:
                return self._send(400, error_answer(str(exc)))
            except BaseException as exc:  # the episode's to record: kept, re-raised by the harness
                bridge.fail(exc)
                return self._send(502, error_answer(f"replaykit: {type(exc).__name__}: {exc}", "replaykit"))
        self._send(status, payload)

    def _send(self, status: int, payload: bytes) -> None:
        self.send_bytes(status, payload)
