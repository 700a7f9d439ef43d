"""A bridge admits only its agent (agents/gate.py): its token, checked before a byte of the body is
read; a connection the agent's process (or one below it) opened, while it runs; a bounded
Content-Length (huge, negative, ``abc``: one 4xx each, the connection closed, no thread left
reading); the token a secret of the episode, hidden from what the agent is handed back."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from replaykit.agents.bridge import Bridge
from replaykit.agents.gate import MAX_BODY, AgentGate, derived_forms
from replaykit.core.secrets import secrets_kept_by
from tests.agents.test_bridge import FakeEnv, FakeLlm, context, post


@pytest.fixture()
def bridge() -> Iterator[Bridge]:
    with Bridge(FakeLlm(), FakeEnv(), context()) as serving:
        yield serving


def raw_request(url: str, head: str, body: bytes = b"") -> tuple[int, bytes, float]:
    """Send ``head`` (request line and headers) and ``body`` by hand; the status, what followed,
    and the seconds the server took to answer and close."""
    parts = urlsplit(url)
    start = time.monotonic()
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head.encode() + b"\r\n\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):  # the server closes a refused connection
            data += chunk
    return int(data.split(b" ", 2)[1]), data, time.monotonic() - start


def test_nothing_is_served_before_the_agent_starts_or_after_it_ended(bridge: Bridge) -> None:
    exec_url = f"{bridge.url}/exec"
    status, error = post(exec_url, {"command": "ls"}, bridge.token)
    assert status == 401 and "not running" in error["error"]["message"]
    bridge.gate.admit(os.getpid())
    assert post(exec_url, {"command": "ls"}, bridge.token)[0] == 200
    bridge.gate.end()
    assert post(exec_url, {"command": "ls"}, bridge.token)[0] == 401
    assert (bridge.gate.served, bridge.gate.refused) == (1, 2)


def test_a_connection_the_agent_did_not_open_is_refused_even_with_the_token(bridge: Bridge) -> None:
    agent = subprocess.Popen(["sleep", "30"])  # the agent: this test's process is not below it
    try:
        bridge.gate.admit(agent.pid)
        status, error = post(f"{bridge.url}/exec", {"command": "ls"}, bridge.token)
    finally:
        agent.kill()
        agent.wait()
    assert status == 401 and "not opened by the agent's process" in error["error"]["message"]
    assert bridge.env.ran == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("length", "status"),
    [(str(10**15), 413), (str(MAX_BODY + 1), 413), ("-5", 400), ("abc", 400), ("", 200), ("1e3", 400)],
)
def test_a_content_length_is_a_bounded_number(bridge: Bridge, length: str, status: int) -> None:
    bridge.gate.admit(os.getpid())
    threads = threading.active_count()
    head = f"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {bridge.token}"
    got, data, took = raw_request(
        bridge.url, head + (f"\r\nContent-Length: {length}" if length else "") + "\r\nConnection: close"
    )
    assert got == status and took < 5, data
    assert data.count(b"HTTP/1.1 ") == 1  # one answer, then the connection closed
    deadline = time.monotonic() + 5
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= threads  # no thread left reading a body that never comes


def test_the_token_is_checked_before_the_body_is_read(bridge: Bridge) -> None:
    bridge.gate.admit(os.getpid())
    head = f"POST /exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Length: {10**9}"
    status, _, took = raw_request(bridge.url, head)  # announces a gigabyte, sends none of it
    assert status == 401 and took < 5


def test_the_token_and_its_forms_are_secrets_of_the_episode_and_hidden_from_the_agent() -> None:
    kept: dict[str, str] = {}
    with secrets_kept_by(lambda name, value: kept.__setitem__(name, value)):
        gate = AgentGate()
    assert kept == derived_forms(gate.token) and kept["bridge_token"] == gate.token
    said = f"X={gate.token} b64 {base64.b64encode(b'TOKEN=' + gate.token.encode()).decode()}"
    hidden = gate.hide(said)
    assert gate.token not in hidden and hidden.startswith("X=<secret:bridge_token> b64 ")
    assert "<secret:bridge_token_b64_" in hidden
