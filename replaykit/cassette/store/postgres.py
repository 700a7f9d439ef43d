"""The PostgreSQL store backend (``postgresql://user@host:port/db``), for teams whose many
machines write one store: the same tables, the same parts and the same verify-on-read as
the SQLite ``Store`` (blobs content-addressed in a ``bytea`` column, checked against
their address on every read; damage is ``store corrupt: …``), through psycopg 3.

Each process (each driver, each proxy writer thread) has its own connection; every
episode is written in one transaction (blobs + document + row), so concurrent writers
never see half a cassette, and a blob two writers store at once is kept once
(``ON CONFLICT DO NOTHING`` on its hash). ``gc``'s ``write_lock`` locks the core tables
against other writers for its transaction. A read-only store connects with read-only
transactions and never creates the schema. Harness trees are materialised under
``~/.cache/replaykit/postgres/<host-db>/`` (or a temporary folder when read-only).

Passwords: put them in ``$PGPASSWORD`` or ``~/.pgpass`` (libpq reads both); a password
in the URL works but is never shown (:attr:`location` drops it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from replaykit.cassette.store import Store
from replaykit.cassette.store.pg_dialect import PgDatabase, create_tables
from replaykit.cassette.urls import redact
from replaykit.core.errors import StoreError

if TYPE_CHECKING:
    from replaykit.cassette.backend import StoreBackend


def cache_root(url: str) -> Path:
    """Where a PostgreSQL store keeps its local caches (materialised harness trees)."""
    parts = urlsplit(url)
    name = f"{parts.hostname or 'local'}-{parts.port or 5432}-{parts.path.strip('/') or 'db'}"
    digest = hashlib.sha256(redact(url).encode("utf-8")).hexdigest()[:8]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "replaykit" / "postgres" / f"{name}-{digest}"


class PostgresStore(Store):
    """A ``Store`` whose index and blobs live in a PostgreSQL database."""

    def __init__(self, url: str, readonly: bool = False) -> None:
        super().__init__(cache_root(url), readonly=readonly)
        self.url = url
        self._pg: PgDatabase | None = None

    @property
    def location(self) -> str:
        return redact(self.url)

    def reopen(self, readonly: bool | None = None) -> Self:
        return type(self)(self.url, self.readonly if readonly is None else readonly)

    # -- plumbing ---------------------------------------------------------------
    def _connect(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise StoreError(
                "the PostgreSQL store needs psycopg 3: pip install 'replaykit[postgres]'"
            ) from None
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(
                f"cannot open store {self.location}: {first}; check the URL, the server and the password"
                " ($PGPASSWORD or ~/.pgpass)"
            ) from None
        if self.readonly:
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")  # reading never writes
        return conn

    @property
    def db(self) -> Any:  # a PgDatabase: the surface of sqlite-utils' Database the parts use
        if self._pg is None:
            pg = PgDatabase(self._connect(), self.location, self.readonly)
            if self.readonly:
                if not self._tables_exist(pg):
                    pg.conn.close()
                    raise StoreError(
                        f"no store at {self.location} (no replaykit tables); check --store or $REPLAYKIT_STORE"
                    )
            else:
                self._ensure_pg_schema(pg)
            self._pg = pg
        return self._pg

    @staticmethod
    def _tables_exist(pg: PgDatabase) -> bool:
        return pg.table("cassettes").exists() and pg.table("runs").exists()

    @staticmethod
    def _ensure_pg_schema(pg: PgDatabase) -> None:
        if (
            PostgresStore._tables_exist(pg)
            and pg.table("leases").exists()
            and pg.table("store_version").exists()
        ):
            return
        with pg.atomic(lock=False):  # one creator at a time: concurrent first writers wait here
            pg.conn.execute("SELECT pg_advisory_xact_lock(?)", (0x7265706C6179,))
            for statement in create_tables():
                pg.conn.execute(statement)

    def exists(self) -> bool:
        """Whether the database holds a store (checking never creates one; a server that
        cannot be reached is an error, not an absent store)."""
        if self._pg is not None:
            return self._tables_exist(self._pg)
        pg = PgDatabase(self._connect(), self.location, self.readonly)
        try:
            return self._tables_exist(pg)
        finally:
            pg.conn.close()

    def _has_table(self, name: str) -> bool:
        return bool(self.db.table(name).exists())

    def _table(self, name: str) -> Any:
        return self.db.table(name)  # every table is created with the schema

    # -- disk space: the server's (autovacuum reuses what gc frees) -------------------
    @contextlib.contextmanager
    def room_to_remove(self) -> Iterator[None]:
        yield  # no reserve file: the database server manages its own disk

    def compact(self) -> dict[str, object]:
        return {
            "compacted": False,
            "note": "the PostgreSQL server reuses the freed space (autovacuum); VACUUM FULL gives it back to the disk",
        }

    def close(self) -> None:
        if self._pg is not None:
            self._pg.conn.close()
            self._pg = None
        self._db = None
        super().close()


def open_postgres(location: str, readonly: bool = False) -> PostgresStore:
    """The ``postgresql`` store backend (``replaykit.cassette.stores``)."""
    if location.startswith("postgres://"):
        location = "postgresql://" + location[len("postgres://") :]
    return PostgresStore(location, readonly=readonly)


__all__ = ["PostgresStore", "cache_root", "open_postgres"]

if TYPE_CHECKING:
    _conforms: type[StoreBackend] = PostgresStore  # mypy: PostgresStore implements the backend protocol
