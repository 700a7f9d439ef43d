"""The PostgreSQL store driver (``postgresql://user@host:port/db``), for teams whose many
machines write one store, through psycopg 3 and in PostgreSQL's own SQL.

Each process (each driver, each proxy writer thread) has its own connection, in autocommit
outside :meth:`PgDriver.transaction`. A writer's transaction first locks the core tables
against other writers (``SHARE ROW EXCLUSIVE``, all at once and in one order: writers wait
their turn instead of deadlocking; readers go on). A blob two writers store at once is kept
once (``ON CONFLICT DO NOTHING`` on its hash). Every committed change bumps one counter
(statement triggers): :meth:`PgDriver.version`. An episode is read in one query
(:meth:`PgDriver.read_document`). A read-only driver runs read-only transactions and never
creates the schema. Harness trees are materialised under
``~/.cache/replaykit/postgres/<host-db>/``.

Passwords: put them in ``$PGPASSWORD`` or ``~/.pgpass`` (libpq reads both); a password
in the URL works but is never shown (:attr:`PgDriver.location` drops it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from replaykit.cassette.store import sql
from replaykit.cassette.store.driver import Conflict, Order, Row, Value, Where
from replaykit.cassette.store.schema import TABLES, key_columns
from replaykit.cassette.urls import redact
from replaykit.core.errors import StoreError

if TYPE_CHECKING:
    from replaykit.cassette.store import Store

#: the core tables, locked together by a writer's transaction (one writer; readers go on)
LOCKED = ("blobs", "cassettes", "runs", "trees", "leases")
#: tables whose changes move the store's version
VERSIONED = ("blobs", "cassettes", "runs", "trees", "certificates")
_TYPES = {str: 'TEXT COLLATE "C"', int: "BIGINT", float: "DOUBLE PRECISION", bytes: "BYTEA"}
_SCHEMA_LOCK = 0x7265706C6179  # pg_advisory_xact_lock: one creator of the schema at a time


def cache_root(url: str) -> Path:
    """Where a PostgreSQL store keeps its local caches (materialised harness trees)."""
    parts = urlsplit(url)
    name = f"{parts.hostname or 'local'}-{parts.port or 5432}-{parts.path.strip('/') or 'db'}"
    digest = hashlib.sha256(redact(url).encode("utf-8")).hexdigest()[:8]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "replaykit" / "postgres" / f"{name}-{digest}"


def schema_ddl() -> list[str]:
    """The tables, their indexes, the version counter and its triggers, as PostgreSQL DDL."""
    statements = []
    for name, spec in TABLES.items():
        cols = ", ".join(f"{sql.ident(c)} {_TYPES[t]}" for c, t in spec["columns"].items())
        key = ", ".join(sql.ident(c) for c in key_columns(spec))
        statements.append(f"CREATE TABLE IF NOT EXISTS {sql.ident(name)} ({cols}, PRIMARY KEY ({key}))")
        for index in spec["indexes"]:
            statements.append(
                f"CREATE INDEX IF NOT EXISTS {sql.ident('_'.join((name, *index)))} ON {sql.ident(name)} "
                f"({', '.join(sql.ident(c) for c in index)})"
            )
    statements += [
        "CREATE TABLE IF NOT EXISTS store_version (one INTEGER PRIMARY KEY CHECK (one = 1), n BIGINT)",
        "INSERT INTO store_version VALUES (1, 0) ON CONFLICT DO NOTHING",
        (
            "CREATE OR REPLACE FUNCTION replaykit_bump() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN UPDATE store_version SET n = n + 1; RETURN NULL; END $$"
        ),
    ]
    for table in VERSIONED:
        statements.append(
            f'CREATE OR REPLACE TRIGGER "{table}_version" AFTER INSERT OR UPDATE OR DELETE ON "{table}"'
            " FOR EACH STATEMENT EXECUTE FUNCTION replaykit_bump()"
        )
    return statements


def _param(value: Value) -> Value:
    return int(value) if isinstance(value, bool) else value  # SQLite stores booleans as 0/1


def _cell(value: Any) -> Value:
    return bytes(value) if isinstance(value, memoryview) else value  # bytea arrives as a memoryview


class PgDriver:
    """The store in one PostgreSQL database."""

    def __init__(self, url: str, readonly: bool = False) -> None:
        if url.startswith("postgres://"):
            url = "postgresql://" + url[len("postgres://") :]
        self.url = url
        self.readonly = readonly
        self._conn: Any = None  # a psycopg.Connection (psycopg is an optional dependency)

    # -- opening ----------------------------------------------------------------------
    @property
    def location(self) -> str:
        return redact(self.url)

    @property
    def local_dir(self) -> Path:
        return cache_root(self.url)

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
    def conn(self) -> Any:
        """The connection (opened on first use; the schema created by a writer)."""
        if self._conn is None:
            conn = self._connect()
            try:
                if not self._tables_exist(conn):
                    if self.readonly:
                        raise StoreError(f"no store at {self.location} (no replaykit tables)")
                    self._create_schema(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _tables_exist(self, conn: Any) -> bool:
        names = [*TABLES, "store_version"]
        with self._errors():
            found = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = ANY(%s)",
                (names,),
            ).fetchone()
        return bool(found[0] == len(names))

    def _create_schema(self, conn: Any) -> None:
        with self._errors(), conn.transaction():  # one creator at a time: concurrent first writers wait here
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            if self._tables_exist(conn):  # made while this one waited: its DDL would lock tables in use
                return
            for statement in schema_ddl():
                conn.execute(statement)

    def exists(self) -> bool:
        """Whether the database holds a store (a server that cannot be reached is an error)."""
        if self._conn is not None:
            return self._tables_exist(self._conn)
        conn = self._connect()
        try:
            return self._tables_exist(conn)
        finally:
            conn.close()

    def reopen(self, readonly: bool) -> PgDriver:
        return PgDriver(self.url, readonly)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """A server error is one line naming the store, never a psycopg traceback."""
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StoreError(
                f"store {self.location}: {type(exc).__name__}: {first}; check the server, then run again"
            ) from None

    def _run(self, text: str, args: Sequence[Value] = ()) -> Any:
        with self._errors():
            return self.conn.execute(text, [_param(a) for a in args] or None)

    # -- transactions -----------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        conn = self.conn
        from psycopg.pq import TransactionStatus

        outermost = conn.info.transaction_status == TransactionStatus.IDLE
        with self._errors(), conn.transaction():
            if outermost and not self.readonly:
                conn.execute(f"LOCK TABLE {', '.join(LOCKED)} IN SHARE ROW EXCLUSIVE MODE")
            yield

    # -- rows -------------------------------------------------------------------------
    def insert(self, table: str, rows: Sequence[Mapping[str, Value]], conflict: Conflict = "error") -> None:
        groups: dict[tuple[str, ...], list[list[Value]]] = {}
        for row in rows:
            groups.setdefault(tuple(row), []).append([_param(v) for v in row.values()])
        key = key_columns(TABLES[table]) if table in TABLES else ()
        for cols, values in groups.items():
            text = f"INSERT INTO {sql.table(table)} ({sql.columns(cols)}) VALUES ({', '.join(['%s'] * len(cols))})"
            if conflict == "ignore":
                text += " ON CONFLICT DO NOTHING"
            elif conflict == "replace":
                updates = ", ".join(f"{sql.ident(c)} = EXCLUDED.{sql.ident(c)}" for c in cols if c not in key)
                target = ", ".join(sql.ident(c) for c in key)
                text += f" ON CONFLICT ({target}) " + (
                    f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
                )
            with self._errors(), self.conn.cursor() as cursor:
                cursor.executemany(text, values)

    def select(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        where: Where | None = None,
        order: Order = (),
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Row]:
        clause, args = sql.where(where, "%s")
        text = f"SELECT {sql.columns(columns)} FROM {sql.table(table)}{clause}{sql.order_by(order)}"
        if limit is not None:
            text += " LIMIT %s"
            args.append(int(limit))
        if offset:
            text += " OFFSET %s"
            args.append(int(offset))
        cursor = self._run(text, args)
        names = [c.name for c in cursor.description]
        return [{n: _cell(v) for n, v in zip(names, r, strict=True)} for r in cursor.fetchall()]

    def count(self, table: str, where: Where | None = None) -> int:
        clause, args = sql.where(where, "%s")
        return int(self._run(f"SELECT count(*) FROM {sql.table(table)}{clause}", args).fetchone()[0])

    def distinct(
        self, table: str, column: str, where: Where | None = None, limit: int | None = None
    ) -> list[Value]:
        found: list[Value] = []
        if self._run(*sql.has_null(table, column, where, "%s")).fetchone() is not None:
            found.append(None)  # first, as SQLite sorts it
        if limit is not None and len(found) >= limit:
            return found[:limit]
        text, args = sql.distinct(table, column, where, "%s", None if limit is None else limit - len(found))
        return found + [_cell(r[0]) for r in self._run(text, args).fetchall()]

    def delete(self, table: str, where: Where) -> int:
        clause, args = sql.where(where, "%s")
        return int(self._run(f"DELETE FROM {sql.table(table)}{clause}", args).rowcount)

    def version(self) -> str:
        return str(self._run("SELECT n FROM store_version").fetchone()[0])

    def read_document(self, table: str, key: Where, doc_column: str) -> tuple[Row, dict[str, Row]] | None:
        """The row, its document's blob and every blob that document names, in one query: the
        hashes are the quoted sha256s of the document's text (``driver.DIGEST_IN_DOC``)."""
        clause, args = sql.where(key, "%s")
        doc = sql.ident(doc_column)
        text = (
            f"WITH r AS (SELECT * FROM {sql.table(table)}{clause} LIMIT 1),"
            f" d AS (SELECT b.hash, b.size, b.data FROM blobs b JOIN r ON b.hash = r.{doc}),"
            " refs AS (SELECT DISTINCT m[1] AS hash FROM d,"
            " regexp_matches(encode(d.data, 'escape'), '\"([0-9a-f]{64})\"', 'g') AS m)"
            " SELECT row_to_json(r)::text, NULL, NULL, NULL FROM r"
            " UNION ALL SELECT NULL, hash, size, data FROM d"
            " UNION ALL SELECT NULL, b.hash, b.size, b.data FROM blobs b JOIN refs ON b.hash = refs.hash"
        )
        rows = self._run(text, args).fetchall()
        if not rows or rows[0][0] is None:
            return None
        import json

        found = json.loads(rows[0][0])
        blobs = {str(h): {"hash": h, "size": s, "data": _cell(d)} for _, h, s, d in rows[1:]}
        return found, blobs

    # -- disk space: the server's (autovacuum reuses what gc frees) -------------------
    @contextlib.contextmanager
    def room_to_remove(self) -> Iterator[None]:
        yield  # no reserve file: the database server manages its own disk

    def compact(self) -> dict[str, object]:
        return {
            "compacted": False,
            "note": "the PostgreSQL server reuses the freed space (autovacuum); VACUUM FULL gives it back to the disk",
        }


def open_postgres(location: str, readonly: bool = False) -> Store:
    """The ``postgresql`` store backend (``replaykit.cassette.stores``)."""
    from replaykit.cassette.store import Store

    return Store(PgDriver(location, readonly))


__all__ = ["LOCKED", "PgDriver", "cache_root", "open_postgres", "schema_ddl"]
