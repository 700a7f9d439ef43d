"""The PostgreSQL server the ``postgres`` tests use (``scripts/setup-postgres.sh`` starts it
on loopback): whether it answers, and a fresh database per test."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from replaykit.cassette.store.postgres import cache_root

#: the server's admin URL (a role that may create databases)
SERVER = os.environ.get(
    "REPLAYKIT_TEST_POSTGRES", "postgresql://replaykit:replaykit@127.0.0.1:54329/replaykit"
)
_state: dict[str, str | None] = {}


def unavailable() -> str | None:
    """None when the test server answers, else a one-line reason (checked once)."""
    if "reason" not in _state:
        try:
            import psycopg

            psycopg.connect(SERVER, connect_timeout=5).close()
            _state["reason"] = None
        except Exception as exc:  # ImportError, psycopg.OperationalError
            _state["reason"] = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return _state["reason"]


def database_url(name: str) -> str:
    return urlunsplit(urlsplit(SERVER)._replace(path=f"/{name}"))


@contextmanager
def fresh_database(prefix: str = "rk") -> Iterator[str]:
    """The URL of a new, empty database (dropped afterwards, connections and all)."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(name)
    finally:
        with psycopg.connect(SERVER, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(cache_root(database_url(name)), ignore_errors=True)  # its materialised trees
