"""A test's process cut off as a replay must be able to run: no Docker daemon (DOCKER_HOST
unserved, no cached client) and every socket refused."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from replaykit.envs.docker import images


def cut_off(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Cut this process off until the test ends; the addresses anything tried to reach."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(images, "_clients", {})
    attempts: list[Any] = []

    def blocked(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("sockets are blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", blocked)
    monkeypatch.setattr(socket.socket, "connect_ex", blocked)
    return attempts
