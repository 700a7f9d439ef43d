"""Who a bridge admits: its agent, and nobody else on this machine.

A request is served only when all of these hold, checked in this order before a byte of its body
is read:

1. it carries the bridge's bearer token (a fresh random value per episode, compared in constant
   time);
2. the agent's process is running: admitted once it started (:meth:`AgentGate.admit`), refused
   after it ended (:meth:`AgentGate.end`) — a straggler, or a child it left behind, is not it;
3. the connection was opened by the agent's process or one below it (Linux: the client socket's
   inode in ``/proc/net/tcp`` held by one of them, ``core/procs.py``), so a neighbour that read the
   token — a task command reading ``/proc/<agent>/environ`` — is still refused;
4. its ``Content-Length`` is a plain number no larger than :data:`MAX_BODY` (huge, negative or
   ``abc``: one 4xx, the connection closed, no thread left reading).

A refused request answers 401 (400/413 for a bad length) and closes its connection; the gate
counts what it served and refused. The token and the forms derived from it are the episode's
secrets (``core.secrets.keep_secret``): stored nowhere, whatever carried them; what the agent is
handed back of a command's output and what it sends its model have them hidden too.
"""

from __future__ import annotations

import base64
import hmac
import secrets
import threading
import weakref
from http.server import BaseHTTPRequestHandler
from typing import cast

from replaykit.core.procs import descendants, peer_pids
from replaykit.core.secrets import keep_secret

#: the largest request body a bridge reads (a chat request with a long history fits)
MAX_BODY = 64 * 1024 * 1024
#: seconds a client may take to send a body it announced
BODY_TIMEOUT_S = 60.0


class Refused(Exception):
    """A request the gate refuses: its status and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def derived_forms(token: str) -> dict[str, str]:
    """The token and what a command could turn it into (base64 at each alignment, hex), by name:
    each scrubbed from what is stored."""
    raw = token.encode()
    forms = {"bridge_token": token, "bridge_token_hex": raw.hex()}
    for shift in range(3):  # inside a longer base64 text, at any of the three byte alignments
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        first, last = -(-8 * shift // 6), (8 * (shift + len(raw)) - 6) // 6  # characters of raw's bits only
        core = encoded[first : last + 1]
        forms[f"bridge_token_b64_{shift}"] = core
        forms[f"bridge_token_b64url_{shift}"] = core.replace("+", "-").replace("/", "_")
    return {name: value for name, value in forms.items() if len(value) >= 16}


class AgentGate:
    """One bridge's admission: the token, the agent's process, the requests counted."""

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(24)
        self.agent: int | None = None
        self.ended = False
        self.served = 0
        self.refused = 0
        self._lock = threading.Lock()
        self._connections: weakref.WeakKeyDictionary[BaseHTTPRequestHandler, bool] = (
            weakref.WeakKeyDictionary()
        )
        self._forms = sorted(derived_forms(self.token).items(), key=lambda item: -len(item[1]))
        for name, value in self._forms:  # the episode stores none of them, whatever carries them
            keep_secret(name, value)

    def hide(self, text: str) -> str:
        """``text`` with the token (and its forms) written as the episode stores them: what the
        agent is handed back of a command's output, so it never sends its token on."""
        for name, value in self._forms:
            text = text.replace(value, f"<secret:{name}>")
        return text

    def hide_bytes(self, data: bytes) -> bytes:
        """The same for a request the agent sends on (its model never sees the token)."""
        for name, value in self._forms:
            data = data.replace(value.encode(), f"<secret:{name}>".encode())
        return data

    def admit(self, pid: int) -> None:
        """The agent's process started (``pid``): its connections are served from now on."""
        self.agent, self.ended = pid, False

    def end(self) -> None:
        """The agent's process ended: every later request is refused."""
        self.ended = True

    def body(self, handler: BaseHTTPRequestHandler) -> bytes:
        """The request's body, once it passed the gate (``Refused`` otherwise: the handler answers
        it and closes the connection)."""
        try:
            self._check(handler)
            raw = handler.headers.get("Content-Length") or "0"
            if not raw.isdigit() or not raw.isascii():
                raise Refused(400, f"Content-Length {raw[:20]!r} is not a number of bytes")
            length = int(raw)
            if length > MAX_BODY:
                raise Refused(413, f"the body ({length} bytes) is over {MAX_BODY} bytes")
            handler.connection.settimeout(BODY_TIMEOUT_S)
            try:
                data = handler.rfile.read(length) if length else b""
            finally:
                handler.connection.settimeout(None)
            if len(data) != length:
                raise Refused(400, "the body ended before its Content-Length")
        except Refused:
            with self._lock:
                self.refused += 1
            handler.close_connection = True
            raise
        with self._lock:
            self.served += 1
        return data

    def _check(self, handler: BaseHTTPRequestHandler) -> None:
        given = handler.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            raise Refused(401, "missing or wrong bearer token")
        if self.agent is None or self.ended:
            raise Refused(401, "the agent's process is not running")
        admitted = self._connections.get(handler)  # a handler is one connection: one look each
        if admitted is None:
            admitted = self._connections[handler] = self._from_agent(handler)
        if not admitted:
            raise Refused(401, "this connection was not opened by the agent's process")

    def _from_agent(self, handler: BaseHTTPRequestHandler) -> bool:
        assert self.agent is not None
        peer = handler.client_address
        server = cast(tuple[str, int], handler.server.server_address)
        holders = peer_pids(
            (str(peer[0]), int(peer[1])), (str(server[0]), int(server[1])), descendants(self.agent)
        )
        return holders is None or bool(holders)  # None: no /proc here to tell (not Linux)
