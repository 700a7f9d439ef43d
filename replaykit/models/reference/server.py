"""The reference model server: a small OpenAI-compatible HTTP server on loopback.

Endpoints: ``GET /v1/models``, ``GET /v1/models/{id}``, ``POST /v1/chat/completions``
(JSON or SSE), ``POST /v1/responses`` (JSON or SSE; rendered by ``responses.py``). Two seams for later roles:

* :func:`build_models` — the registry of model name → handler. A handler turns a
  :class:`ChatRequest` into an :class:`AssistantTurn`; a ``reference-proposer``
  is added there.
* ``_Handler.ROUTES`` — (method, path) → endpoint method. The Responses API
  (``POST /v1/responses``) is one more route rendering the same turns.

Responses (headers included: ``Date`` is ``SOURCE_DATE_EPOCH``) are a pure
function of the request body and the task folders loaded at ``start()``.
"""

from __future__ import annotations

import email.utils
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from replaykit.core.determinism import SOURCE_DATE_EPOCH
from replaykit.core.errors import ModelError
from replaykit.core.loopback import LoopbackHandler, LoopbackServer, http_chunk
from replaykit.core.records import JSON
from replaykit.models.reference.noise import batch_noise
from replaykit.models.reference.noisy import NAME as NOISY_MODEL
from replaykit.models.reference.noisy import NoisyTaskModel
from replaykit.models.reference.proposer import PROPOSER_MODEL, proposer_turn
from replaykit.models.reference.protocol import (
    ApiError,
    AssistantTurn,
    ChatRequest,
    dumps,
    parse_chat_request,
    parse_json_object,
)
from replaykit.models.reference.simulator import Task, TaskModel, load_tasks, task_models
from replaykit.models.reference.sse import chat_completion, sse_events

ModelHandler = Callable[[ChatRequest], AssistantTurn]

OWNER = "replaykit-reference"
MAX_BODY_BYTES = 64 * 1024 * 1024


def build_models(tasks: Sequence[Task]) -> dict[str, ModelHandler]:
    """The model registry: name → handler. Add new roles (e.g. a proposer) here."""
    models: dict[str, ModelHandler] = {}
    models.update(task_models(tasks))
    models[NOISY_MODEL] = NoisyTaskModel(tasks)  # per-task noise (noisy.py)
    models[PROPOSER_MODEL] = proposer_turn
    return models


class _Server(LoopbackServer):
    """The loopback server, plus the model registry."""

    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], models: dict[str, ModelHandler], noise: bool = False
    ) -> None:
        super().__init__(address, _Handler)
        self.models = models
        self.noise = noise  # batch-dependent sampling (noise.py): replies vary with the open connections


class _Handler(LoopbackHandler):
    server_version = OWNER
    server: _Server

    ROUTES: ClassVar[dict[tuple[str, str], str]] = {
        ("GET", "/v1/models"): "list_models",
        ("POST", "/v1/chat/completions"): "chat_completions",
        ("POST", "/v1/responses"): "create_response",  # not "responses": BaseHTTPRequestHandler.responses
    }

    # -- plumbing ----------------------------------------------------------------
    def date_time_string(self, timestamp: float | None = None) -> str:
        return email.utils.formatdate(SOURCE_DATE_EPOCH, usegmt=True)

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            body = self._read_body()
            name = self.ROUTES.get((method, path))
            if name is not None:
                getattr(self, name)(body)
            elif method == "GET" and path.startswith("/v1/models/"):
                self.retrieve_model(path[len("/v1/models/") :])
            else:
                raise ApiError(404, f"Invalid URL ({method} {path})", code="unknown_url")
        except ApiError as err:
            self._send_json(err.status, err.payload())
        except Exception as exc:  # a simulator bug: answer like an API would, not with a reset
            self.close_connection = True
            self._send_json(
                500, ApiError(500, f"reference server error: {exc!r}", type="server_error").payload()
            )

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self.close_connection = True
            raise ApiError(400, "Chunked request bodies are not supported; send Content-Length.")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError as exc:
            self.close_connection = True
            raise ApiError(400, "Invalid Content-Length header.") from exc
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            raise ApiError(400, f"Request body must be 0..{MAX_BODY_BYTES} bytes.")
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, payload: Mapping[str, object]) -> None:
        data = dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, events: list[bytes]) -> None:
        """One HTTP chunk per SSE event, each written (and so sent) on its own."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self.wfile.write(http_chunk(event))
            self.wfile.flush()
        self.wfile.write(http_chunk(b""))
        self.wfile.flush()

    # -- endpoints -----------------------------------------------------------------
    def _model_object(self, name: str) -> dict[str, JSON]:
        return {"id": name, "object": "model", "created": SOURCE_DATE_EPOCH, "owned_by": OWNER}

    def list_models(self, body: bytes) -> None:
        data = [self._model_object(name) for name in sorted(self.server.models)]
        self._send_json(200, {"object": "list", "data": data})

    def retrieve_model(self, name: str) -> None:
        if name not in self.server.models:
            raise _model_not_found(name)
        self._send_json(200, self._model_object(name))

    def chat_completions(self, body: bytes) -> None:
        request = parse_chat_request(parse_json_object(body))
        handler = self.server.models.get(request.model)
        if handler is None:
            raise _model_not_found(request.model)
        turn = handler(request)
        if self.server.noise:
            with self.server.connections_lock:
                load = len(self.server.connections)
            turn = batch_noise(turn, request.digest, load)
        if request.stream:
            self._send_stream(sse_events(request, turn))
        else:
            self._send_json(200, chat_completion(request, turn))

    def create_response(self, body: bytes) -> None:
        """The Responses API, rendered by ``responses.py`` from the same model registry."""
        from replaykit.models.reference.responses import respond

        reply = respond(parse_json_object(body), self.server.models)
        if isinstance(reply, list):
            self._send_stream(reply)
        else:
            self._send_json(200, reply)


def _model_not_found(name: str) -> ApiError:
    return ApiError(
        404,
        f"The model `{name}` does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


class ReferenceServer:
    """The reference model server on a daemon thread; also a context manager.

    ``task_dirs``: task folders, or folders holding them; ``None`` means every
    task under ``<repo>/envs/``. Tasks are loaded at :meth:`start`.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        task_dirs: list[Path] | None = None,
        noise: bool = False,
        on_unknown: Callable[[ChatRequest], None] | None = None,
    ) -> None:
        self.host = host
        self.noise = noise
        self.on_unknown = on_unknown
        self._requested_port = port
        self.task_dirs = task_dirs
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise ModelError("the reference server is not running; call start() first")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> str:
        """Bind, load tasks, serve on a daemon thread; returns ``base_url``."""
        if self._server is not None:
            return self.base_url
        models = build_models(load_tasks(self.task_dirs))
        for handler in models.values():  # each task model tells of a conversation it knows no task in
            if isinstance(handler, TaskModel):
                handler.on_unknown = self.on_unknown
        try:
            self._server = _Server((self.host, self._requested_port), models, noise=self.noise)
        except OSError as exc:
            raise ModelError(
                f"cannot bind the reference server to {self.host}:{self._requested_port}: {exc}"
            ) from exc
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="replaykit-reference",
            daemon=True,
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving, close open keep-alive connections, release the port."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = None
        self._thread = None

    def wait(self) -> None:
        """Block until the server is stopped (from another thread or by Ctrl-C)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def __enter__(self) -> "ReferenceServer":
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _warn_unknown() -> Callable[[ChatRequest], None]:
    """A warning on stderr, once per conversation, when the model knows no task in it: a
    separately started server without ``--tasks`` knows only ``envs/``, and would otherwise
    score a foreign task 0 with 0 steps, silently."""
    seen: set[str] = set()
    lock = threading.Lock()

    def warn(request: ChatRequest) -> None:
        first = next((str(m.get("content"))[:200] for m in request.messages if m.get("role") == "user"), "")
        with lock:
            if first in seen:
                return
            seen.add(first)
        line = " ".join(first.split())[:60]
        print(
            f"replaykit reference server: warning: no task it knows in the conversation starting {line!r} "
            "(it answers that it has nothing to run; the episode scores 0); restart it with --tasks FOLDER",
            file=sys.stderr,
            flush=True,
        )

    return warn


def serve_forever(
    host: str = "127.0.0.1",
    port: int = 8642,
    task_dirs: list[Path] | None = None,
    on_ready: Callable[[str], None] | None = None,
    noise: bool = False,
) -> None:
    """Serve in the foreground until interrupted (for ``replaykit serve reference``).

    ``on_ready`` is called once with the ``base_url`` after the port is bound;
    ``noise`` turns on batch-dependent sampling (``noise.py``).
    """
    server = ReferenceServer(
        host=host,
        port=port,
        task_dirs=task_dirs,
        noise=noise,
        on_unknown=None if task_dirs else _warn_unknown(),
    )
    url = server.start()
    if on_ready is not None:
        on_ready(url)
    try:
        server.wait()  # Ctrl-C propagates: the command exits 130
    finally:
        server.stop()
