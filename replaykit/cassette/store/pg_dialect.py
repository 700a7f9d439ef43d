"""The store's SQL on PostgreSQL: the parts of the store are written once, against the
small surface of a sqlite-utils ``Database`` they use (``db.conn.execute`` with ``?``
parameters and ``[name]`` identifiers, ``db.atomic()``, ``db.table(name)`` with
``exists``/``insert``/``insert_all``/``rows_where``); :class:`PgDatabase` provides that
surface over a psycopg 3 connection, translating the few SQLite spellings the store uses
(``?``, ``[name]``, ``INSERT OR IGNORE``, ``BEGIN IMMEDIATE``, ``PRAGMA data_version``)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from replaykit.cassette.store.schema import EXTRA_TABLES, SCHEMA, Cell
from replaykit.core.errors import StoreError

#: the core tables, locked together by ``BEGIN IMMEDIATE`` (one writer; readers go on)
LOCKED = ("blobs", "cassettes", "runs", "trees", "leases")
#: tables whose changes move the store's version (``change_token``)
VERSIONED = ("blobs", "cassettes", "runs", "trees", "certificates")
_PG_TYPES = {str: 'TEXT COLLATE "C"', int: "BIGINT", float: "DOUBLE PRECISION", bytes: "BYTEA"}
_IDENT = re.compile(r"\[(\w+)\]")
_IGNORE = re.compile(r"^\s*INSERT OR IGNORE INTO", re.I)


def translate(sql: str, params: bool = True) -> str:
    """SQLite spellings the store uses → PostgreSQL (parameters become ``%s``; without
    parameters the text is sent as it is, so it may hold several statements)."""
    stripped = sql.strip()
    if stripped.upper() == "BEGIN IMMEDIATE":
        return "BEGIN; LOCK TABLE " + ", ".join(LOCKED) + " IN SHARE ROW EXCLUSIVE MODE"
    if stripped.upper() == "PRAGMA DATA_VERSION":  # bumped by every write (triggers below)
        return "SELECT n FROM store_version"
    out = _IDENT.sub(r'"\1"', sql)
    if params:
        out = out.replace("%", "%%").replace("?", "%s")
    if _IGNORE.match(out):
        out = _IGNORE.sub("INSERT INTO", out) + " ON CONFLICT DO NOTHING"
    return out


def _value(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value  # SQLite stores booleans as 0/1


def create_tables() -> list[str]:
    """The schema as PostgreSQL DDL (every table up front: reads never find one missing)."""
    statements = []
    for name, spec in {**SCHEMA, **EXTRA_TABLES}.items():
        cols = ", ".join(
            f'"{c}" {_PG_TYPES[t]}' + (" PRIMARY KEY" if c == spec["pk"] else "")
            for c, t in spec["columns"].items()
        )
        statements.append(f'CREATE TABLE IF NOT EXISTS "{name}" ({cols})')
    statements.append(
        'CREATE TABLE IF NOT EXISTS leases (owner TEXT COLLATE "C", tbl TEXT COLLATE "C",'
        ' key TEXT COLLATE "C", host TEXT, pid BIGINT, taken DOUBLE PRECISION,'
        " PRIMARY KEY (owner, tbl, key))"
    )
    statements.append(
        "CREATE TABLE IF NOT EXISTS store_version (one INTEGER PRIMARY KEY CHECK (one = 1), n BIGINT)"
    )
    statements.append("INSERT INTO store_version VALUES (1, 0) ON CONFLICT DO NOTHING")
    statements.append(
        "CREATE OR REPLACE FUNCTION replaykit_bump() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN UPDATE store_version SET n = n + 1; RETURN NULL; END $$"
    )
    for table in VERSIONED:  # what SQLite's data_version sees: any committed change
        statements.append(
            f'CREATE OR REPLACE TRIGGER "{table}_version" AFTER INSERT OR UPDATE OR DELETE ON "{table}"'
            " FOR EACH STATEMENT EXECUTE FUNCTION replaykit_bump()"
        )
    statements.append("CREATE INDEX IF NOT EXISTS cassettes_task_seed ON cassettes (task_id, seed)")
    statements.append("CREATE INDEX IF NOT EXISTS runs_kind ON runs (kind, config_digest)")
    return statements


class PgConnection:
    """``execute``/``executemany`` with the store's SQLite spellings, on a psycopg connection.
    A server error is one line naming the store (``where``), never a psycopg traceback."""

    def __init__(self, conn: Any, where: str = "") -> None:
        self.raw, self.where = conn, where

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StoreError(
                f"store {self.where}: {type(exc).__name__}: {first}; check the server, then run again"
            ) from None

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return bool(self.raw.info.transaction_status != TransactionStatus.IDLE)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cursor = self.raw.cursor()
        args = [_value(v) for v in params]
        with self._errors():
            cursor.execute(translate(sql, bool(args)), args or None)
        return cursor

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> Any:
        cursor = self.raw.cursor()
        rows = [[_value(v) for v in params] for params in seq]
        if rows:
            with self._errors():
                cursor.executemany(translate(sql), rows)
        return cursor

    def close(self) -> None:
        self.raw.close()


class PgTable:
    """The part of a sqlite-utils ``Table`` the store uses."""

    def __init__(self, db: PgDatabase, name: str) -> None:
        self.db, self.name = db, name

    def exists(self) -> bool:
        row = self.db.conn.execute("SELECT to_regclass(?)", (f'"{self.name}"',)).fetchone()
        return row is not None and row[0] is not None

    def _pk(self, pk: str | None = None) -> str:
        spec = SCHEMA.get(self.name) or EXTRA_TABLES.get(self.name)
        return pk or (spec["pk"] if spec else "id")

    def insert(self, row: Mapping[str, Cell], replace: bool = False, pk: str | None = None) -> None:
        cols = list(row)
        sql = f"INSERT INTO [{self.name}] ({', '.join(f'[{c}]' for c in cols)}) VALUES ({', '.join('?' * len(cols))})"
        if replace:
            key = self._pk(pk)
            updates = ", ".join(f"[{c}] = EXCLUDED.[{c}]" for c in cols if c != key)
            sql += f" ON CONFLICT ([{key}]) " + (f"DO UPDATE SET {updates}" if updates else "DO NOTHING")
        self.db.conn.execute(sql, [row[c] for c in cols])

    def insert_all(
        self, rows: Iterable[Mapping[str, Cell]], pk: str | None = None, alter: bool = False
    ) -> None:
        """Rows as exported (an existing primary key is an error, as in SQLite)."""
        del pk, alter  # the schema is fixed: bundles carry the core tables' columns
        for row in rows:
            self.insert(row)

    def rows_where(
        self,
        where: str | None = None,
        where_args: Sequence[Any] = (),
        order_by: str | None = None,
        limit: int | None = None,
    ) -> Iterator[dict[str, Cell]]:
        sql = f"SELECT * FROM [{self.name}]"
        args = list(where_args)
        if where:
            sql += f" WHERE {where}"
        if order_by:
            sql += f" ORDER BY {order_by}"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        cursor = self.db.conn.execute(sql, args)
        cols = [c.name for c in cursor.description]
        for r in cursor.fetchall():
            yield dict(zip(cols, r, strict=True))

    def create(self, columns: dict[str, type], pk: str) -> None:
        cols = ", ".join(
            f'"{c}" {_PG_TYPES[t]}' + (" PRIMARY KEY" if c == pk else "") for c, t in columns.items()
        )
        self.db.conn.execute(f'CREATE TABLE IF NOT EXISTS "{self.name}" ({cols})')


class PgDatabase:
    """The part of a sqlite-utils ``Database`` the store uses, over one psycopg connection
    (autocommit; ``atomic()`` is a transaction, nested ones savepoints)."""

    def __init__(self, conn: Any, where: str = "", readonly: bool = False) -> None:
        self.conn = PgConnection(conn, where)
        self.readonly = readonly

    def table(self, name: str) -> PgTable:
        return PgTable(self, name)

    def __getitem__(self, name: str) -> PgTable:
        return self.table(name)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, params)

    @contextlib.contextmanager
    def atomic(self, lock: bool = True) -> Iterator[None]:
        """A transaction. A writer's outermost one first locks the core tables against
        other writers (as ``BEGIN IMMEDIATE``): all its locks are taken at once, in one
        order, so concurrent writers wait their turn instead of deadlocking."""
        outermost = not self.conn.in_transaction
        with self.conn._errors(), self.conn.raw.transaction():
            if outermost and lock and not self.readonly:
                self.conn.execute(f"LOCK TABLE {', '.join(LOCKED)} IN SHARE ROW EXCLUSIVE MODE")
            yield


__all__ = ["LOCKED", "PgConnection", "PgDatabase", "PgTable", "create_tables", "translate"]
