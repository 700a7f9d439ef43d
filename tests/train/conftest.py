"""Fixtures for training tests: a network that refuses every connection, a store snapshot."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from replaykit.cassette.store import Store
from tests.store_sql import raw_sql


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to block sockets and model endpoints from then on (a model call fails loudly)."""

    def block() -> None:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(
                f"network use during an offline audit: {args[1:] if len(args) > 1 else args}"
            )

        import replaykit.episodes.run
        import replaykit.models.endpoint as endpoint
        import replaykit.train.proposal

        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket.socket, "connect_ex", refuse)
        monkeypatch.setattr(socket, "create_connection", refuse)
        monkeypatch.setattr(endpoint, "open_endpoint", refuse)
        monkeypatch.setattr(replaykit.episodes.run, "open_endpoint", refuse)
        monkeypatch.setattr(replaykit.train.proposal, "open_endpoint", refuse)

    return block


@pytest.fixture
def store_state() -> Callable[[Store], dict[str, Any]]:
    """A snapshot of what a store holds (ids of cassettes and documents, tree and blob counts)."""

    def snapshot(store: Store) -> dict[str, Any]:
        conn = raw_sql(store)
        out = {
            t: conn.execute(f"SELECT count(*), group_concat(id) FROM {t}").fetchone()
            for t in ("cassettes", "runs")
        }
        out["trees"] = conn.execute("SELECT count(*) FROM trees").fetchone()
        out["blobs"] = conn.execute("SELECT count(*) FROM blobs").fetchone()
        return out

    return snapshot
