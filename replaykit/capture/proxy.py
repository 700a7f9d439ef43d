"""The recording proxy: an OpenAI-compatible HTTP front for agents in another process.

A CLI agent (Codex, …) cannot be intercepted in-process, so it talks to this proxy
on a loopback port instead of its model endpoint. The proxy is bound to a
:class:`~replaykit.capture.tape.Tape`:

* **recording** — each ``POST /v1/chat/completions`` / ``POST /v1/responses`` is
  forwarded to the upstream with the *configured* key (never the client's); an SSE
  body is relayed to the client frame by frame as it arrives, and the exchange is
  kept as an :class:`LlmEvent` (request form, exact bytes, chunking) — the same
  form the in-process vcrpy recorder writes, so keys, store and digests apply.
* **replaying** — the tape answers (chunks re-sent as recorded) and the upstream
  may be down. A request that differs from the recorded one (after the declared
  normalisation rules) gets HTTP 409 whose body names the divergence and carries
  the normalised diff; the tape keeps the :class:`DivergenceError` for the caller.

Exchanges are serialised (one at a time) so positions in the tape are stable —
unless the server is ``concurrent`` (many agents at once, ``replaykit proxy``):
then exchanges overlap, are kept in the order they complete, and a replay matches
each request within its conversation (:mod:`replaykit.capture.conversations`:
by content on ``/v1``, in order per client on a session path ``/s/<session>/v1``).
Every exchange is kept (and handed to ``on_exchange``, which may persist it)
before the client receives its last byte, so a completed exchange is never lost.
``GET /v1/models`` passes through while recording and is answered from the tape
while replaying. Headers are never stored, so no API key reaches a cassette;
secrets are scrubbed from what is kept (request forms, the joined response stream),
never from what is relayed: the client gets the upstream's bytes unchanged.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import threading
import zlib
from typing import Any, Callable, ClassVar, Iterator
from urllib.parse import urlsplit

from replaykit.capture.conversations import ConversationPlayer, split_session
from replaykit.cassette.events import KEPT_HEADERS, Event, LlmEvent
from replaykit.capture.matchers import Scrubber, request_form
from replaykit.capture.tape import Tape
from replaykit.errors import ConfigError, DivergenceError
from replaykit.models.failures import transport_failure
from replaykit.loopback import LoopbackHandler, LoopbackServer, http_chunk

MODEL_PATHS = ("/v1/chat/completions", "/v1/responses")
#: never forwarded upstream: hop-by-hop headers, the client's credentials, framing we redo
DROPPED_HEADERS = frozenset(
    {
        "host",
        "authorization",
        "api-key",
        "x-api-key",
        "proxy-authorization",
        "proxy-connection",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "accept-encoding",
        "content-encoding",
        "expect",
    }
)
MAX_BODY_BYTES = 64 * 1024 * 1024


class Upstream:
    """The real endpoint: ``scheme://host:port/base`` (the base path replaces the proxy's ``/v1``)."""

    def __init__(self, url: str, api_key: str = "", timeout: float = 600.0) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"upstream {url!r} is not an http(s) URL; pass e.g. --upstream https://api.example.com/v1"
            )
        self.url = url.rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base = parts.path.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def path_for(self, client_path: str) -> str:
        """``/v1/responses?x`` (or ``/s/<session>/v1/responses?x``) → ``<base>/responses?x``."""
        client_path = split_session(client_path)[1]
        rest = client_path[3:] if client_path.startswith("/v1") else client_path
        return self.base + rest


#: On answers a retry cannot fix (a divergence, a malformed request): the openai SDKs
#: honour ``x-should-retry: false`` and give up at once instead of retrying with backoff.
NO_RETRY = [("x-should-retry", "false")]


def _error_body(message: str, type_: str, code: str | None = None, **extra: Any) -> bytes:
    error = {"message": message, "type": type_, "param": None, "code": code, **extra}
    return json.dumps({"error": error}, ensure_ascii=False).encode("utf-8")


def _upstream_pieces(resp: http.client.HTTPResponse) -> Iterator[bytes]:
    """The body as it arrives: one piece per HTTP chunk frame when chunked, else per read."""
    if not resp.chunked:
        while piece := resp.read1(65536):
            yield piece
        return
    fp = resp.fp
    while True:
        line = fp.readline(65537)
        if not line:
            return
        size = int(line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while fp.readline(65537) not in (b"\r\n", b"\n", b""):
                pass
            return
        data = fp.read(size)
        fp.read(2)
        yield data


class ProxyServer(LoopbackServer):
    """The proxy on a loopback port; start/stop it or use :func:`recording_proxy`."""

    def __init__(
        self,
        tape: Tape,
        upstream: str | None,
        scrubber: Scrubber | None = None,
        rules: tuple[str, ...] = (),
        api_key: str = "",
        host: str = "127.0.0.1",
        port: int = 0,
        timeout: float = 600.0,
        concurrent: bool = False,
        on_exchange: Callable[[list[Event]], None] | None = None,
    ) -> None:
        if upstream is None and not tape.replaying:
            raise ConfigError("the recording proxy needs an upstream URL to record")
        secrets = dict((scrubber or Scrubber()).secrets)
        if api_key:
            secrets.setdefault("api_key", api_key)
        self.tape = tape
        self.upstream = Upstream(upstream, api_key, timeout) if upstream else None
        self.scrubber = Scrubber(secrets)
        self.rules = tuple(rules)
        self.exchange_lock = threading.Lock()
        self.keep_lock = threading.Lock()
        self.concurrent = concurrent
        self.on_exchange = on_exchange
        self.player = (
            ConversationPlayer(tape.label, tape.recorded)
            if concurrent and tape.recorded is not None
            else None
        )
        self.errors: list[str] = []
        self._thread: threading.Thread | None = None
        super().__init__((host, port), _ProxyHandler)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> str:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, name="replaykit-proxy", daemon=True
        )
        self._thread.start()
        return self.base_url

    def keep(self, event: LlmEvent) -> None:
        """Append a completed exchange to the tape and hand the tape to ``on_exchange``."""
        with self.keep_lock:
            self.tape.record(event)
            snapshot = list(self.tape.events)
        if self.on_exchange is not None:  # outside the lock: concurrent exchanges share one write
            self.on_exchange(snapshot)

    def stop(self) -> None:
        """Stop serving, drop open keep-alive connections, release the port."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self.close_connections()
        self.server_close()


class _ProxyHandler(LoopbackHandler):
    server_version = "replaykit-proxy"
    server: ProxyServer
    ROUTES: ClassVar[dict[tuple[str, str], str]] = {
        ("POST", "/v1/chat/completions"): "model_call",
        ("POST", "/v1/responses"): "model_call",
        ("GET", "/v1/models"): "list_models",
    }

    def _dispatch(self, method: str) -> None:
        route = self.ROUTES.get((method, split_session(self.path)[1].split("?", 1)[0].rstrip("/")))
        try:
            body = self._read_body()
        except ValueError as exc:
            self.close_connection = True
            self._send(
                400,
                [("content-type", "application/json"), *NO_RETRY],
                [_error_body(f"replaykit proxy: {exc}", "invalid_request_error")],
            )
            return
        if route is None:
            message = f"replaykit proxy: no route for {method} {self.path}; it serves {', '.join(MODEL_PATHS)} and GET /v1/models"
            self._send(
                404,
                [("content-type", "application/json"), *NO_RETRY],
                [_error_body(message, "invalid_request_error", "unknown_url")],
            )
            return
        getattr(self, route)(method, body)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while size := int(self.rfile.readline(65537).split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.read(2)
            while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                pass
            body = b"".join(parts)
        else:
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 <= length <= MAX_BODY_BYTES:
                raise ValueError(f"request body must be 0..{MAX_BODY_BYTES} bytes")
            body = self.rfile.read(length) if length else b""
        encoding = self.headers.get("Content-Encoding", "identity").lower()
        if encoding == "gzip":
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
        if encoding not in ("identity", ""):
            raise ValueError(
                f"cannot read a {encoding!r}-encoded request body; turn request compression off in the client"
            )
        return body

    def _send(
        self, status: int, headers: list[tuple[str, str]], chunks: list[bytes], reason: str | None = None
    ) -> None:
        """A whole response: SSE as one chunk frame per recorded chunk, anything else with Content-Length."""
        streamed = any(k == "content-type" and v.startswith("text/event-stream") for k, v in headers)
        self.send_response(status, reason or None)
        for name, value in headers:
            self.send_header(name, value)
        if streamed:
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(http_chunk(chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            data = b"".join(chunks)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        self.wfile.flush()

    def _scrubber(self) -> Scrubber:
        """The session's scrubber plus whatever credential this client sent."""
        secrets = dict(self.server.scrubber.secrets)
        for header in ("Authorization", "api-key", "x-api-key"):
            value = self.headers.get(header, "")
            value = value[7:].strip() if value.lower().startswith("bearer ") else value.strip()
            if value:
                secrets.setdefault(f"client_{header.lower()}", value)
        return Scrubber(secrets)

    # -- endpoints -------------------------------------------------------------------
    def model_call(self, method: str, body: bytes) -> None:
        scrubber = self._scrubber()
        form = request_form(method, self.path, body, scrubber, self.server.rules)
        lock = contextlib.nullcontext() if self.server.concurrent else self.server.exchange_lock
        with lock:
            if self.server.tape.replaying:
                self._replay(form)
            else:
                self._record(method, form, body, scrubber)

    def _replay(self, form: dict[str, Any]) -> None:
        player = self.server.player
        try:
            event = player.play(form) if player is not None else self.server.tape.play_llm(form)
        except DivergenceError as exc:
            report = exc.report or {}
            payload = _error_body(
                f"replaykit replay divergence: {exc}",
                "replaykit_divergence",
                "replay_divergence",
                position=report.get("position"),
                diff=report.get("diff", []),
            )
            self._send(409, [("content-type", "application/json"), *NO_RETRY], [payload])
            return
        self._send(event.status, event.headers, event.split_chunks(), event.reason)

    def _forward_headers(self, body: bytes) -> dict[str, str]:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in DROPPED_HEADERS}
        upstream = self.server.upstream
        assert upstream is not None
        if upstream.api_key:
            headers["Authorization"] = f"Bearer {upstream.api_key}"
        headers["Accept-Encoding"] = "identity"
        headers["Content-Length"] = str(len(body))
        return headers

    def _record(self, method: str, form: dict[str, Any], body: bytes, scrubber: Scrubber) -> None:
        upstream = self.server.upstream
        assert upstream is not None
        conn = upstream.connect()
        try:
            try:
                conn.request(
                    method, upstream.path_for(self.path), body=body, headers=self._forward_headers(body)
                )
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                message = f"replaykit proxy: upstream {upstream.url} failed: {exc}"
                self.server.errors.append(message)
                self.server.tape.transport_errors.append(transport_failure(method, self.path, exc))
                self.close_connection = True
                self._send(
                    502,
                    [("content-type", "application/json")],
                    [_error_body(message, "upstream_error", "upstream_unreachable")],
                )
                return
            headers = [(k.lower(), v) for k, v in resp.getheaders() if k.lower() in KEPT_HEADERS]
            streamed = any(k == "content-type" and v.startswith("text/event-stream") for k, v in headers)
            if streamed:
                chunks, client_ok = self._relay(resp, headers)
            else:
                data = resp.read()
                chunks = [data] if data else []
        finally:
            conn.close()
        # kept (and persisted) before the client sees the end of the response; the stored copy is
        # scrubbed as one joined stream, the client gets the upstream's bytes unchanged
        stored = scrubber.chunks(chunks)
        self.server.keep(
            LlmEvent(
                method=form["method"],
                path=form["path"],
                body=form["body"],
                status=resp.status,
                reason=resp.reason or "",
                headers=headers,
                content=b"".join(stored),
                chunks=[len(c) for c in stored],
            )
        )
        if not streamed:
            with contextlib.suppress(OSError):
                self._send(resp.status, headers, chunks, resp.reason)
        elif client_ok:
            with contextlib.suppress(OSError):
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        else:
            self.close_connection = True

    def _relay(
        self, resp: http.client.HTTPResponse, headers: list[tuple[str, str]]
    ) -> tuple[list[bytes], bool]:
        """Relay an SSE body frame by frame as it arrives (all but the final empty frame);
        keep every frame for the tape. Returns the frames and whether the client is still there."""
        chunks: list[bytes] = []
        client_ok = True
        try:
            self.send_response(resp.status, resp.reason or None)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
        except OSError:
            client_ok = False
        for piece in _upstream_pieces(resp):
            if not piece:
                continue
            chunks.append(piece)
            if client_ok:
                try:
                    self.wfile.write(http_chunk(piece))
                    self.wfile.flush()
                except OSError:
                    client_ok = False  # keep reading: the tape gets the whole response
        return chunks, client_ok

    def list_models(self, method: str, body: bytes) -> None:
        """Pass-through while recording (not recorded); the models the tape used while replaying."""
        server = self.server
        if server.tape.replaying or server.upstream is None:
            names = sorted(
                {
                    e.body["model"]
                    for e in server.tape.recorded or []
                    if isinstance(e, LlmEvent)
                    and isinstance(e.body, dict)
                    and isinstance(e.body.get("model"), str)
                }
            )
            listing = {
                "object": "list",
                "data": [
                    {"id": n, "object": "model", "created": 0, "owned_by": "replaykit-cassette"}
                    for n in names
                ],
            }
            self._send(200, [("content-type", "application/json")], [json.dumps(listing).encode()])
            return
        conn = server.upstream.connect()
        try:
            conn.request("GET", server.upstream.path_for(self.path), headers=self._forward_headers(b""))
            resp = conn.getresponse()
            data = resp.read()  # relayed as it is, never stored
            headers = [(k.lower(), v) for k, v in resp.getheaders() if k.lower() in KEPT_HEADERS]
            self._send(resp.status, headers, [data], resp.reason)
        except (OSError, http.client.HTTPException) as exc:
            self._send(
                502,
                [("content-type", "application/json")],
                [_error_body(f"replaykit proxy: upstream failed: {exc}", "upstream_error")],
            )
        finally:
            conn.close()


@contextlib.contextmanager
def recording_proxy(
    tape: Tape,
    upstream: str | None,
    scrubber: Scrubber | None = None,
    rules: tuple[str, ...] = (),
    *,
    api_key: str = "",
    host: str = "127.0.0.1",
    port: int = 0,
    timeout: float = 600.0,
    concurrent: bool = False,
) -> Iterator[str]:
    """Serve the proxy for ``tape`` on a free loopback port; yields its ``base_url`` (``…/v1``).

    ``api_key`` is what the proxy sends upstream (the client's key is dropped).
    While replaying, ``upstream`` is never contacted and may be ``None``.
    """
    server = ProxyServer(tape, upstream, scrubber, tuple(rules), api_key, host, port, timeout, concurrent)
    try:
        yield server.start()
    finally:
        server.stop()
