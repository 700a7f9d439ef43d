"""The names a viewer answers to, by the address it is bound to (DNS rebinding)."""

from __future__ import annotations

import socket

import pytest

from replaykit.core.hosts import HostCheck


@pytest.mark.parametrize(
    ("bound", "header", "allowed"),
    [
        ("127.0.0.1", "127.0.0.1:8770", True),
        ("127.0.0.1", "localhost:8770", True),
        ("127.0.0.1", "LOCALHOST.", True),
        ("127.0.0.1", "127.0.0.1:9000", True),  # an ssh -L forward keeps the name, not the port
        ("127.0.0.1", "evil.example:8770", False),
        ("127.0.0.1", "10.0.0.5:8770", False),
        ("127.0.0.1", "127.0.0.1:x", False),
        ("127.0.0.1", "127.0.0.1/x", False),
        ("127.0.0.1", "user@127.0.0.1", False),
        ("127.0.0.1", None, False),
        ("::1", "[::1]:8770", True),
        ("::1", "evil.example", False),
        ("0.0.0.0", "192.168.1.20:8770", True),  # every interface: an IP literal cannot be rebound
        ("0.0.0.0", "[fe80::1]:8770", True),
        ("0.0.0.0", "evil.example:8770", False),
        ("192.168.1.20", "192.168.1.20:8770", True),
        ("192.168.1.20", "192.168.1.21:8770", False),
        ("192.168.1.20", "evil.example", False),
    ],
)
def test_host_header(bound: str, header: str | None, allowed: bool) -> None:
    assert HostCheck(bound).allows(header) is allowed


def test_served_beyond_loopback_this_machines_name_is_its_own() -> None:
    name = socket.gethostname()
    assert HostCheck("0.0.0.0").allows(f"{name}:8770")
    assert not HostCheck("127.0.0.1").allows(f"{name}:8770") or name.lower() == "localhost"
