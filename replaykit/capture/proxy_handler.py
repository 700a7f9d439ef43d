"""The proxy's request handler: one HTTP exchange with an agent.

Reads the client's request (chunked or sized, gzip/deflate), answers it from the
tape while replaying (HTTP 409 with the normalised diff on a divergence), or
forwards it upstream while recording — relaying an SSE body frame by frame and
keeping the exchange on the tape before the client gets its last byte. The server
state it works on (tape, upstream, scrubber, locks) is :class:`ProxyState`, which
:class:`~replaykit.capture.proxy.ProxyServer` implements.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import socket
import threading
import time
import zlib
from typing import ClassVar

from replaykit.capture.conversations import ConversationPlayer, Resume, split_session
from replaykit.capture.deadlines import DEADLINES
from replaykit.capture.failures import BODY_SNIPPET, Failure, incomplete_answer
from replaykit.capture.matchers import request_form
from replaykit.capture.proxy_answers import HTTP2_PREFACE, HTTP2_REFUSED, NO_RETRY, error_body, http2_goaway
from replaykit.capture.tape import Tape
from replaykit.capture.upstream import Upstream, upstream_pieces
from replaykit.cassette.events import KEPT_HEADERS, LlmEvent, RequestForm
from replaykit.cassette.scrub import Scrubber, presented_credentials
from replaykit.core.determinism import canonical_json
from replaykit.core.errors import DivergenceError
from replaykit.core.hosts import HostCheck, OriginCheck
from replaykit.core.loopback import LoopbackHandler, LoopbackServer, http_chunk

MODEL_PATHS = ("/v1/chat/completions", "/v1/responses")
MAX_BODY_BYTES = 64 * 1024 * 1024


class ProxyState(LoopbackServer):
    """What the handler reads and calls of its server; ``proxy.ProxyServer`` is the one."""

    tape: Tape
    upstream: Upstream | None  # None: replay only
    scrubber: Scrubber
    rules: tuple[str, ...]
    concurrent: bool
    exchange_lock: threading.Lock
    player: ConversationPlayer | None  # concurrent replay: requests matched by content
    resume: Resume | None  # recording on top of a recording that stopped early
    errors: list[str]
    hosts: HostCheck  # the names this proxy answers to (DNS rebinding)
    origins: OriginCheck  # the browser origins it serves: its own and --allow-origin's

    def keep(self, event: LlmEvent, presented: dict[str, str] | None = None) -> None:
        """Append a completed exchange to the tape (``presented``: the client's credentials)."""
        raise NotImplementedError

    def restore(self, chunks: list[bytes], presented: dict[str, str]) -> list[bytes]:
        """Recorded chunks as this client may see them (its own key back only if recorded)."""
        raise NotImplementedError

    def note(self, line: str) -> None:
        """One line for the user."""
        raise NotImplementedError

    def diverged(self, error: DivergenceError) -> None:
        """A divergence, as it is answered (409)."""
        raise NotImplementedError


class ProxyHandler(LoopbackHandler):
    """Routes ``POST`` model calls to record/replay and ``GET /v1/models`` to a listing."""

    server_version = "replaykit-proxy"
    server: ProxyState
    raw_requestline: bytes  # set by BaseHTTPRequestHandler.handle_one_request
    ROUTES: ClassVar[dict[tuple[str, str], str]] = {
        ("POST", "/v1/chat/completions"): "model_call",
        ("POST", "/v1/responses"): "model_call",
        ("GET", "/v1/models"): "list_models",
    }

    def parse_request(self) -> bool:
        """HTTP/1.1 requests as usual; an HTTP/2 connection preface is refused the HTTP/2 way
        (GOAWAY, HTTP_1_1_REQUIRED) and noted in one line, never a silent disconnect."""
        if self.raw_requestline.startswith(HTTP2_PREFACE):
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.rfile.read(8)  # the rest of the preface: "\r\nSM\r\n\r\n"
                self.wfile.write(http2_goaway(HTTP2_REFUSED))
                self.wfile.flush()
            self.server.note(HTTP2_REFUSED)
            return False
        return super().parse_request()

    cors_origin: str | None = None  # an allowed cross-site origin this answer names (CORS)

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    def end_headers(self) -> None:
        if self.cors_origin is not None:
            self.send_header("Access-Control-Allow-Origin", self.cors_origin)
            self.send_header("Vary", "Origin")
        super().end_headers()

    def _admitted(self) -> bool:
        """Only a client that addresses the proxy by its own name, and no web page but its own or
        one the user allowed, is served: anything else could spend the key the proxy holds (a
        cross-site ``text/plain`` POST needs no preflight; DNS rebinding reads the answers).
        A refused request is answered 403 before its body is read: never forwarded or recorded."""
        host, origin = self.headers.get("Host"), self.headers.get("Origin")
        self.cors_origin = None
        if not self.server.hosts.allows(host):
            why = f"Host {str(host)[:80]!r} is not this proxy's address ({self.server.hosts.expected()})"
        elif not self.server.origins.allows(origin):
            why = (
                f"Origin {str(origin)[:80]!r} is not this proxy's own: a web page may not spend the key "
                "(a browser client you mean to record: --allow-origin ORIGIN)"
            )
        else:
            self.cors_origin = self.server.origins.cross_site(origin)
            return True
        self.close_connection = True  # its body is never read
        self.server.note(f"refused {self.command} {self.path[:80]}: {why}")
        message = f"replaykit proxy: refused: {why}"
        self._send(403, [("content-type", "application/json"), *NO_RETRY], [error_body(message, "forbidden")])
        return False

    def _preflight(self) -> None:
        """A CORS preflight from an allowed origin: the methods and headers it may send."""
        self.close_connection = self.cors_origin is None
        asked = self.headers.get("Access-Control-Request-Headers", "")
        headers = [("access-control-allow-methods", "GET, POST, OPTIONS"), ("access-control-max-age", "600")]
        if asked:
            headers.append(("access-control-allow-headers", asked[:2048]))
        self._send(204 if self.cors_origin else 403, headers, [])

    def _dispatch(self, method: str) -> None:
        if not self._admitted():
            return
        if method == "OPTIONS":
            self._preflight()
            return
        route = self.ROUTES.get((method, split_session(self.path)[1].split("?", 1)[0].rstrip("/")))
        try:
            body = self._read_body()
        except ValueError as exc:
            self.close_connection = True
            self._send(
                400,
                [("content-type", "application/json"), *NO_RETRY],
                [error_body(f"replaykit proxy: {exc}", "invalid_request_error")],
            )
            return
        if route is None:
            message = f"replaykit proxy: no route for {method} {self.path}; it serves {', '.join(MODEL_PATHS)} and GET /v1/models"
            self._send(
                404,
                [("content-type", "application/json"), *NO_RETRY],
                [error_body(message, "invalid_request_error", "unknown_url")],
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
        for name, value in presented_credentials(self.headers.items()).items():
            secrets.setdefault(name, value)
        return Scrubber(secrets)

    # -- endpoints -------------------------------------------------------------------
    def model_call(self, method: str, body: bytes) -> None:
        scrubber = self._scrubber()
        form = request_form(method, self.path, body, scrubber, self.server.rules)
        lock = contextlib.nullcontext() if self.server.concurrent else self.server.exchange_lock
        with lock:
            if self.server.tape.replaying:
                self._replay(form)
            elif self.server.resume is not None:
                self._resume(method, form, body, scrubber)
            else:
                self._record(method, form, body, scrubber)

    def _replay(self, form: RequestForm) -> None:
        player = self.server.player
        try:
            event = player.play(form) if player is not None else self.server.tape.play_llm(form)
        except DivergenceError as exc:
            self._diverged(exc)
            return
        self._serve(event)

    def _resume(self, method: str, form: RequestForm, body: bytes, scrubber: Scrubber) -> None:
        """A session whose recording stopped early: what was recorded is served, a request that
        takes a conversation up at its recorded end is recorded, anything else diverges."""
        resume = self.server.resume
        assert resume is not None
        event = resume.player.take(form)
        if event is not None:
            self._serve(event)
        elif resume.continuations.continues(form):
            self._record(method, form, body, scrubber)
        else:
            self._diverged(resume.player.divergence_for(form))

    def _serve(self, event: LlmEvent) -> None:
        """A recorded answer, as it was stored; the client's own credential comes back only to
        the very client that presented it while recording (``ProxyServer.restore``)."""
        chunks = self.server.restore(event.split_chunks(), presented_credentials(self.headers.items()))
        self._send(event.status, event.headers, chunks, event.reason)

    def _diverged(self, exc: DivergenceError) -> None:
        report = exc.report or {}
        payload = error_body(
            f"replaykit replay divergence: {exc}",
            "replaykit_divergence",
            "replay_divergence",
            position=report.get("position"),
            diff=report.get("diff", []),
        )
        self.server.diverged(exc)
        self._send(409, [("content-type", "application/json"), *NO_RETRY], [payload])

    def _record(self, method: str, form: RequestForm, body: bytes, scrubber: Scrubber) -> None:
        upstream = self.server.upstream
        assert upstream is not None
        conn = upstream.connect()
        late: list[bool] = []
        watchdog = DEADLINES.arm(time.monotonic() + upstream.timeout, lambda: _cut(conn, late))
        try:
            try:
                conn.request(
                    method,
                    upstream.path_for(self.path),
                    body=body,
                    headers=upstream.forward_headers(self.headers.items(), body),
                )
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                failed: BaseException = TimeoutError(_late(upstream.timeout)) if late else exc
                self._upstream_failed(method, form, f"{type(failed).__name__}: {failed}", False)
                return
            headers = [(k.lower(), v) for k, v in resp.getheaders() if k.lower() in KEPT_HEADERS]
            streamed = any(k == "content-type" and v.startswith("text/event-stream") for k, v in headers)
            cut: BaseException | None = None
            if streamed:
                chunks, client_ok, cut = self._relay(resp, headers)
            else:
                try:
                    data = resp.read()
                except (OSError, http.client.HTTPException) as exc:
                    data, cut = b"", exc
                chunks = [data] if data else []
        finally:
            DEADLINES.cancel(watchdog)
            conn.close()
        if late:
            cut = TimeoutError(_late(upstream.timeout))
        problem = (
            f"{type(cut).__name__}: {cut}"
            if cut is not None
            else incomplete_answer(form["path"], resp.status, headers, b"".join(chunks))
        )
        if problem:  # a cut or malformed answer is never kept: an infrastructure failure
            self._upstream_failed(method, form, problem if cut else f"incomplete answer: {problem}", streamed)
            return
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
            ),
            presented_credentials(self.headers.items()),
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

    def _upstream_failed(self, method: str, form: RequestForm, detail: str, streamed: bool) -> None:
        """The upstream refused, cut or garbled its answer: noted on the tape as an endpoint
        failure (a retry that succeeds clears it); the client gets a 502, or a stream it sees cut."""
        upstream = self.server.upstream
        assert upstream is not None
        detail = self._scrubber().text(detail)  # a garbled body's head is quoted: never a key
        message = f"replaykit proxy: upstream {upstream.url} failed: {detail}"
        self.server.errors.append(message)
        failure = Failure(method.upper(), form["path"], 0, "", detail[:BODY_SNIPPET], canonical_json(form))
        self.server.tape.transport_errors.append(failure)
        self.close_connection = True
        if streamed:
            return  # the client already has the head of the stream: it sees it end without its last frame
        with contextlib.suppress(OSError):
            self._send(
                502,
                [("content-type", "application/json")],
                [error_body(message, "upstream_error", "upstream_unreachable")],
            )

    def _relay(
        self, resp: http.client.HTTPResponse, headers: list[tuple[str, str]]
    ) -> tuple[list[bytes], bool, BaseException | None]:
        """Relay an SSE body frame by frame as it arrives (all but the final empty frame);
        keep every frame for the tape. Returns the frames, whether the client is still there,
        and what cut the upstream's body (None: it ended properly)."""
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
        try:
            for piece in upstream_pieces(resp):
                if not piece:
                    continue
                chunks.append(piece)
                if client_ok:
                    try:
                        self.wfile.write(http_chunk(piece))
                        self.wfile.flush()
                    except OSError:
                        client_ok = False  # keep reading: the tape gets the whole response
        except (OSError, http.client.HTTPException, ValueError) as exc:  # ValueError: a bad chunk size
            return chunks, client_ok, exc
        return chunks, client_ok, None

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
            conn.request(
                "GET",
                server.upstream.path_for(self.path),
                headers=server.upstream.forward_headers(self.headers.items(), b""),
            )
            resp = conn.getresponse()
            data = resp.read()  # relayed as it is, never stored
            headers = [(k.lower(), v) for k, v in resp.getheaders() if k.lower() in KEPT_HEADERS]
            self._send(resp.status, headers, [data], resp.reason)
        except (OSError, http.client.HTTPException) as exc:
            self._send(
                502,
                [("content-type", "application/json")],
                [error_body(f"replaykit proxy: upstream failed: {exc}", "upstream_error")],
            )
        finally:
            conn.close()


def _late(timeout: float) -> str:
    return f"no whole answer within {timeout:g} s (the proxy's total deadline, --timeout)"


def _cut(conn: http.client.HTTPConnection, late: list[bool]) -> None:
    """The total deadline passed: end the upstream exchange (its reads fail at once)."""
    late.append(True)
    if conn.sock is not None:
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_RDWR)
