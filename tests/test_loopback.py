"""The loopback servers' plumbing: a client hanging up is silent, a server bug is one line."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from replaykit.core.loopback import LoopbackHandler, LoopbackServer


class _Handler(LoopbackHandler):
    server_version = "test"

    def _dispatch(self, method: str) -> None:
        raise RuntimeError("boom in the handler")


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    srv = LoopbackServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _wait_for_threads(before: int) -> None:
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_client_that_resets_its_connection_prints_nothing(
    server: LoopbackServer, capfd: pytest.CaptureFixture[str]
) -> None:
    before = threading.active_count()
    client = socket.create_connection((str(server.server_address[0]), int(server.server_address[1])))
    client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # half a request
    time.sleep(0.2)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # RST: the server's read fails with ConnectionResetError
    _wait_for_threads(before)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ConnectionResetError" not in err, err


def test_a_server_error_is_one_line_not_a_traceback(
    server: LoopbackServer, capfd: pytest.CaptureFixture[str]
) -> None:
    before = threading.active_count()
    with socket.create_connection((str(server.server_address[0]), int(server.server_address[1]))) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        client.settimeout(5)
        try:
            client.recv(1024)
        except OSError:
            pass
    _wait_for_threads(before)
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "boom in the handler" in lines[0], err
