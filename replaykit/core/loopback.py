"""Small threaded HTTP/1.1 servers on loopback: the plumbing shared by the reference
model server and the recording proxy.

Keep-alive with Nagle's algorithm off (~7 ms per call instead of ~50 ms), no log
line per request (nor a traceback when a client hangs up), and a record of open connections so ``close_connections`` can
drop idle keep-alive sockets when the server stops.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def http_chunk(data: bytes) -> bytes:
    """One ``Transfer-Encoding: chunked`` frame (the empty frame ends the body)."""
    return f"{len(data):X}\r\n".encode("ascii") + data + b"\r\n"


class LoopbackServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its open connections."""

    daemon_threads = True
    # socketserver's default listen backlog is 5: twenty agents connecting at once (each
    # proxied call opens its own upstream connection) overflow it on a loaded machine and
    # see resets. A deeper backlog costs nothing.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-request (reset, broken pipe) is normal for a server:
        nothing is printed. Anything else is one line on stderr, not socketserver's traceback."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        print(f"replaykit server: error serving {client_address}: {exc!r}", file=sys.stderr)

    def serve_in_thread(self, name: str) -> LoopbackServer:
        """Serve on a daemon thread named ``name`` until :meth:`stop_serving`."""
        self._serving = threading.Thread(target=self.serve_forever, name=name, daemon=True)
        self._serving.start()
        return self

    def stop_serving(self) -> None:
        """Stop serving, drop the open keep-alive connections, close the socket, join the thread."""
        self.shutdown()
        self.close_connections()
        self.server_close()
        serving = getattr(self, "_serving", None)
        if serving is not None:
            serving.join(timeout=10)

    def close_connections(self) -> None:
        with self.connections_lock:
            open_sockets = list(self.connections)
            self.connections.clear()
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class LoopbackHandler(BaseHTTPRequestHandler):
    """Subclasses set ``server_version`` and implement ``_dispatch(method)``."""

    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True
    server: LoopbackServer

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: no line on stderr per request."""

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        raise NotImplementedError

    def send_bytes(self, status: int, data: bytes, content_type: str = "application/json") -> None:
        """One whole answer: its status, type, length and body."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
