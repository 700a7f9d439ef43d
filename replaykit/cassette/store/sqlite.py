"""The SQLite store driver: a folder holding ``index.db`` (the standard library's sqlite3;
sqlite-utils creates the tables of a new store), the default backend.

One connection per driver, opened lazily: a writable one (WAL, the tables, indexes and
browsing views created when missing, a small disk reserve kept beside the index: ``gc``
must run on a full disk) or a read-only one (``mode=rw`` plus ``PRAGMA query_only``:
reading never writes; on a folder it cannot write, holding no write-ahead log, immutable;
a store that is not there is an error, a table it lacks reads as empty). Writers take ``BEGIN IMMEDIATE`` up front and wait out another process's lock.
Every SQLite failure is one line (:mod:`~replaykit.cassette.store.guard`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from replaykit.cassette.store import sql
from replaykit.cassette.store.driver import Conflict, Order, Row, Value, Where
from replaykit.cassette.store.guard import GuardedConnection, connect, free_bytes
from replaykit.cassette.store.schema import INDEX, SCHEMA, TABLES, key_columns
from replaykit.core.errors import StoreError

T = TypeVar("T")
RESERVE = "reserve.bin"
RESERVE_BYTES = 1 << 20
#: a reserve is (re)made only while this much more than it is free
MARGIN = 3 * RESERVE_BYTES

#: Read-only SQL views for browsing the index (e.g. `datasette cassettes/index.db`):
#: documents are JSON blobs, unpacked here with SQLite's JSON functions.
_DOC = "json(CAST((SELECT data FROM blobs WHERE hash = r.doc) AS TEXT))"
VIEWS: dict[str, str] = {
    "episodes": """
        SELECT c.id AS cassette_id, c.task_id, c.seed, c.model, c.endpoint, c.model_revision, c.harness_sha,
               c.reward, c.passed, c.infra_failure, c.tokens, c.n_llm AS llm_calls, c.n_env AS steps,
               c.digest, c.created_at
        FROM cassettes c WHERE c.kind = 'episode'""",
    "run_summaries": f"""
        SELECT r.id AS run_id, r.name, r.harness_sha, r.model, r.endpoint,
               json_extract({_DOC}, '$.solved') AS solved, json_extract({_DOC}, '$.total') AS total,
               json_array_length({_DOC}, '$.cassettes') AS episodes, r.created_at
        FROM runs r WHERE r.kind = 'measure'""",
    "run_episodes": f"""
        SELECT r.id AS run_id, e.cassette_id, e.task_id, e.seed, e.model, e.harness_sha, e.reward, e.passed,
               e.infra_failure, e.tokens, e.llm_calls, e.steps
        FROM runs r, json_each({_DOC}, '$.cassettes') j JOIN episodes e ON e.cassette_id = j.value
        WHERE r.kind = 'measure'""",
    "verdicts": f"""
        SELECT r.id AS verdict_id, json_extract({_DOC}, '$.training_id') AS training_id,
               json_extract({_DOC}, '$.epoch') AS epoch, json_extract({_DOC}, '$.baseline_sha') AS baseline_sha,
               json_extract({_DOC}, '$.candidate_sha') AS candidate_sha,
               json_extract({_DOC}, '$.baseline_run') AS baseline_run, json_extract({_DOC}, '$.candidate_run') AS candidate_run,
               json_extract({_DOC}, '$.verdict.criterion') AS criterion, json_extract({_DOC}, '$.verdict.accept') AS accept,
               json_extract({_DOC}, '$.verdict.loss') AS loss, json_extract({_DOC}, '$.verdict.reason') AS reason,
               json_extract({_DOC}, '$.verdict.new_solves') AS new_solves,
               json_extract({_DOC}, '$.verdict.regressions') AS regressions, r.created_at
        FROM runs r WHERE r.kind = 'verdict'""",
    "trainings": f"""
        SELECT r.id AS training_id, r.name, r.model, json_extract({_DOC}, '$.initial_sha') AS initial_sha,
               json_extract({_DOC}, '$.final_baseline') AS final_baseline,
               json_array_length({_DOC}, '$.epochs') AS epochs,
               (SELECT count(*) FROM json_each({_DOC}, '$.epochs') e
                WHERE json_extract(e.value, '$.decision') = 'accepted') AS accepted, r.created_at
        FROM runs r WHERE r.kind = 'training'""",
}


def retry_locked(fn: Callable[[], T], seconds: float = 30.0) -> T:
    """Run ``fn``, waiting while another process holds the database (e.g. creating the schema)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _table_names(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}


def _ensure_schema(conn: GuardedConnection) -> None:
    """The tables (sqlite-utils creates those missing: a new store), indexes and views a store lacks."""
    have = _table_names(conn)
    if set(TABLES) - have:
        import sqlite_utils  # only for a new table: it costs a listing's start-up time otherwise

        db = sqlite_utils.Database(conn)
        for name, spec in TABLES.items():  # another process may create one in between: no error then
            if name not in have:
                key = key_columns(spec)
                db.table(name).create(
                    spec["columns"], pk=key[0] if len(key) == 1 else key, if_not_exists=True
                )
    for name, spec in TABLES.items():  # named as sqlite-utils names them
        for cols in spec["indexes"]:
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS [idx_{name}_{'_'.join(cols)}] ON [{name}] ({', '.join(f'[{c}]' for c in cols)})"
            )
    views = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall()}
    for name, text in VIEWS.items():  # created with the schema; an existing view is left as it is
        if name not in views:
            conn.execute(f"CREATE VIEW IF NOT EXISTS [{name}] AS {text}")


def _read_mode(root: Path) -> str:
    """How a reader opens the index: ``mode=rw`` (query_only keeps it read-only), or, in a
    folder this process cannot write that holds no write-ahead log (a read-only mount, a
    store of another user), ``mode=ro&immutable=1``: SQLite cannot create there the
    shared-memory file a WAL reader needs, and with no log the index file is the whole store."""
    wal = root / f"{INDEX}-wal"
    if os.access(root, os.W_OK) or (wal.exists() and wal.stat().st_size):
        return "mode=rw"
    return "mode=ro&immutable=1"


class SqliteDriver:
    """The store in ``root/index.db``."""

    def __init__(self, root: Path | str, readonly: bool = False) -> None:
        self.root = Path(root)
        self.readonly = readonly
        self._conn: GuardedConnection | None = None
        self._tables: set[str] = set()
        self._savepoints = 0
        self._commits = 0  # this connection's own commits (data_version counts the others')

    # -- opening ----------------------------------------------------------------------
    @property
    def location(self) -> str:
        return str(self.root)

    @property
    def local_dir(self) -> Path:
        return self.root

    @property
    def conn(self) -> GuardedConnection:
        """The connection (opened on first use)."""
        if self._conn is None:
            conn = self._open_readonly() if self.readonly else self._open()
            self._tables = _table_names(conn)
            self._conn = conn
        return self._conn

    def _open(self) -> GuardedConnection:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            conn = connect(str(self.root / INDEX), self.root, timeout=30, isolation_level=None)
            retry_locked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
            conn.execute("PRAGMA synchronous=NORMAL")
            retry_locked(lambda: _ensure_schema(conn))
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StoreError(f"cannot open store {self.root}: {exc}; check the path or pass --store") from exc
        self.ensure_reserve()
        return conn

    def _open_readonly(self) -> GuardedConnection:
        path = self.root / INDEX
        if not path.is_file():
            raise StoreError(f"no store at {self.root} (no index.db)")
        try:
            conn = connect(
                f"file:{quote(str(path.resolve()))}?{_read_mode(self.root)}",
                self.root,
                uri=True,
                timeout=30,
                isolation_level=None,
            )
            conn.execute("PRAGMA query_only=ON")  # reading never writes
            missing = [name for name in SCHEMA if name not in _table_names(conn)]
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StoreError(f"cannot open store {self.root}: {exc}; check the path or pass --store") from exc
        if missing:
            conn.close()
            raise StoreError(f"{path} is not a replaykit store (no table {missing[0]!r}); check --store")
        return conn

    def _has(self, table: str) -> bool:
        """Whether the table is there (a read-only store may predate it: it reads as empty)."""
        conn = self.conn
        if table not in self._tables:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
            if found.fetchone() is not None:
                self._tables.add(table)
        return table in self._tables

    def exists(self) -> bool:
        return (self.root / INDEX).is_file()

    def reopen(self, readonly: bool) -> SqliteDriver:
        return SqliteDriver(self.root, readonly)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- transactions -----------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        conn = self.conn
        if conn.in_transaction:  # a savepoint of the outer transaction
            self._savepoints += 1
            name = f"replaykit_{self._savepoints}"
            conn.execute(f"SAVEPOINT {name}")
            try:
                yield
            except BaseException:
                if conn.in_transaction:  # an error may have ended the whole transaction already
                    conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                    conn.execute(f"RELEASE SAVEPOINT {name}")
                raise
            conn.execute(f"RELEASE SAVEPOINT {name}")
            return
        retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self._commits += 1

    @contextlib.contextmanager
    def _write(self) -> Iterator[GuardedConnection]:
        """One statement's transaction, unless one is open already."""
        conn = self.conn
        if conn.in_transaction:
            yield conn
            return
        with self.transaction():
            yield conn

    # -- rows -------------------------------------------------------------------------
    def insert(self, table: str, rows: Sequence[Mapping[str, Value]], conflict: Conflict = "error") -> None:
        verb = {"error": "INSERT", "ignore": "INSERT OR IGNORE", "replace": "INSERT OR REPLACE"}[conflict]
        groups: dict[tuple[str, ...], list[list[Value]]] = {}
        for row in rows:
            groups.setdefault(tuple(row), []).append(list(row.values()))
        if not groups:
            return
        with self._write() as conn:
            for cols, values in groups.items():
                marks = ", ".join("?" * len(cols))
                conn.executemany(
                    f"{verb} INTO {sql.table(table)} ({sql.columns(cols)}) VALUES ({marks})", values
                )

    def select(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        where: Where | None = None,
        order: Order = (),
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Row]:
        name = sql.table(table)
        conn = self.conn
        if not self._has(table):
            return []
        clause, args = sql.where(where, "?")
        text = f"SELECT {sql.columns(columns)} FROM {name}{clause}{sql.order_by(order)}"
        if limit is not None or offset:
            text += " LIMIT ? OFFSET ?"
            args += [-1 if limit is None else int(limit), int(offset)]
        cursor = conn.execute(text, args)
        names = [c[0] for c in cursor.description]
        return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]

    def count(self, table: str, where: Where | None = None) -> int:
        name = sql.table(table)
        conn = self.conn
        if not self._has(table):
            return 0
        clause, args = sql.where(where, "?")
        return int(conn.execute(f"SELECT COUNT(*) FROM {name}{clause}", args).fetchone()[0])

    def distinct(
        self, table: str, column: str, where: Where | None = None, limit: int | None = None
    ) -> list[Value]:
        conn = self.conn
        if not self._has(table):
            return []
        found: list[Value] = []
        if conn.execute(*sql.has_null(table, column, where, "?")).fetchone() is not None:
            found.append(None)
        if limit is not None and len(found) >= limit:
            return found[:limit]
        text, args = sql.distinct(table, column, where, "?", None if limit is None else limit - len(found))
        return found + [r[0] for r in conn.execute(text, args).fetchall()]

    def delete(self, table: str, where: Where) -> int:
        name = sql.table(table)
        if not self._has(table):
            return 0
        clause, args = sql.where(where, "?")
        with self._write() as conn:
            return int(conn.execute(f"DELETE FROM {name}{clause}", args).rowcount)

    def version(self) -> str:
        return f"{self.conn.execute('PRAGMA data_version').fetchone()[0]}-{self._commits}"

    # -- disk space -------------------------------------------------------------------
    def ensure_reserve(self) -> None:
        """Make the reserve when it is missing and the disk has room (best effort)."""
        path = self.root / RESERVE
        if self.readonly or path.exists():
            return
        free = free_bytes(self.root)
        if free is None or free < RESERVE_BYTES + MARGIN:
            return
        tmp = path.with_name(f".{RESERVE}.{os.getpid()}")
        try:
            with open(tmp, "wb") as fh:
                fh.write(b"\0" * RESERVE_BYTES)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()

    @contextlib.contextmanager
    def room_to_remove(self) -> Iterator[None]:
        """Inside, deletions have room even on a full disk: the reserve is given back first
        (and remade afterwards when there is room again)."""
        with contextlib.suppress(OSError):
            (self.root / RESERVE).unlink()
        conn = self.conn
        conn.execute("PRAGMA secure_delete=FAST")  # deleting must not rewrite every freed page
        try:
            yield
        finally:
            conn.execute("PRAGMA secure_delete=ON")
        self.ensure_reserve()

    def compact(self) -> dict[str, object]:
        """Give freed pages back to the disk (``VACUUM``) when there is room for a copy of
        the index; otherwise only checkpoint the journal. Says which, and why."""
        index = self.root / INDEX
        size = index.stat().st_size if index.exists() else 0
        free = free_bytes(self.root) or 0
        conn = self.conn
        if free >= 2 * size + MARGIN:
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return {"compacted": True, "index_bytes": index.stat().st_size}
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return {
            "compacted": False,
            "index_bytes": size,
            "note": f"index.db keeps its size until {2 * size + MARGIN - free} more bytes are free to compact it;"
            " later writes reuse the freed space",
        }


__all__ = ["VIEWS", "SqliteDriver", "retry_locked"]
