"""Opening a store: the connection (read-write or read-only), the schema created on
first write, and the plumbing every part of :class:`~replaykit.cassette.store.Store`
uses (one row by key, ids by unique prefix, refusing writes when read-only)."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Self, TypeVar
from urllib.parse import quote

import sqlite_utils

from replaykit.cassette.store.guard import connect
from replaykit.cassette.store.schema import EXTRA_TABLES, INDEX, SCHEMA, VIEWS, as_rows, retry_locked
from replaykit.core.errors import CassetteNotFound, StoreCorrupt, StoreError

if TYPE_CHECKING:
    from replaykit.cassette.store.schema import CassetteColumns

T = TypeVar("T")


class StoreBase:
    """A folder holding ``index.db``, opened lazily; the parts of ``Store`` build on it."""

    def __init__(self, root: Path | str, readonly: bool = False) -> None:
        self.root = Path(root)
        self.readonly = readonly
        self._db: sqlite_utils.Database | None = None
        self._checked: dict[
            str, tuple[str, CassetteColumns]
        ] = {}  # cassette id -> (doc hash, derived columns)
        self._scratch: Path | None = None

    # -- plumbing ---------------------------------------------------------------
    @property
    def db(self) -> sqlite_utils.Database:
        if self._db is None and self.readonly:
            self._db = self._open_readonly()
        if self._db is None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                conn = connect(str(self.root / INDEX), self.root, timeout=30, isolation_level=None)
                db = sqlite_utils.Database(conn)
                retry_locked(lambda: db.execute("PRAGMA journal_mode=WAL"))
                db.execute("PRAGMA synchronous=NORMAL")
                retry_locked(lambda: self._ensure_schema(db))
            except (sqlite3.DatabaseError, OSError) as exc:
                raise StoreError(
                    f"cannot open store {self.root}: {exc}; check the path or pass --store"
                ) from exc
            self._db = db
            self._opened()
        return self._db

    def _opened(self) -> None:
        """Called once a writable connection is open (the space part keeps its reserve)."""

    def _open_readonly(self) -> sqlite_utils.Database:
        path = self.root / "index.db"
        if not path.is_file():
            raise StoreError(f"no store at {self.root} (no index.db); check --store or $REPLAYKIT_STORE")
        try:
            conn = connect(
                f"file:{quote(str(path.resolve()))}?mode=rw",
                self.root,
                uri=True,
                timeout=30,
                isolation_level=None,
            )
            conn.execute("PRAGMA query_only=ON")  # reading never writes
            db = sqlite_utils.Database(conn)
            missing = [name for name in SCHEMA if not db.table(name).exists()]
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StoreError(f"cannot open store {self.root}: {exc}; check the path or pass --store") from exc
        if missing:
            raise StoreError(f"{path} is not a replaykit store (no table {missing[0]!r}); check --store")
        return db

    @staticmethod
    def _ensure_schema(db: sqlite_utils.Database) -> None:
        for name, spec in SCHEMA.items():
            if not db.table(name).exists():  # another process may create it in between: no error then
                db.table(name).create(spec["columns"], pk=spec["pk"], if_not_exists=True)
        db.table("cassettes").create_index(["task_id", "seed"], if_not_exists=True)
        have = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall()}
        for name, sql in VIEWS.items():  # created with the schema; an existing view is left as it is
            if name not in have:
                db.execute(f"CREATE VIEW IF NOT EXISTS [{name}] AS {sql}")

    @property
    def location(self) -> str:
        """What ``open_store`` reopens this store from (and messages name): its folder."""
        return str(self.root)

    def reopen(self, readonly: bool | None = None) -> Self:
        """A new connection to the same store (e.g. for another thread)."""
        return type(self)(self.root, self.readonly if readonly is None else readonly)

    def exists(self) -> bool:
        """Whether this folder holds a store (checking never creates one)."""
        return (self.root / INDEX).is_file()

    def _table(self, name: str) -> sqlite_utils.db.Table:
        """A table, created on first use when another layer owns it (``EXTRA_TABLES``)."""
        table = self.db.table(name)
        if (
            name in EXTRA_TABLES and not table.exists() and not self.readonly
        ):  # read-only: an absent table reads as empty
            table.create(EXTRA_TABLES[name]["columns"], pk=EXTRA_TABLES[name]["pk"])
        return table

    def _has_table(self, name: str) -> bool:
        return self.db.table(name).exists()

    def close(self) -> None:
        if self._db is not None:
            self._db.conn.close()
            self._db = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """One write transaction taken up front (BEGIN IMMEDIATE, waiting out another
        writer): what is read inside cannot change before what is written inside commits.
        Nested inside another transaction it is a savepoint of that one."""
        self.writable()
        db = self.db
        if db.conn.in_transaction:
            with db.atomic():
                yield
            return
        conn = db.conn
        retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def writable(self) -> None:
        """Refuse a write through a read-only store (replay, audit, listings, export)."""
        if self.readonly:
            raise StoreError(
                f"store {self.location} is open read-only (replay, audit and listings never write)"
            )

    def corrupt(self, what: str, where: str = "") -> StoreCorrupt:
        return StoreCorrupt(what, where, self.location)

    def _row(self, shape: type[T], table: str, pk: str, value: str) -> T | None:
        """One row by primary key, as ``shape`` (the table's row TypedDict; a plain query:
        sqlite-utils' ``Table.get`` reads the table's schema with a PRAGMA on every call)."""
        cursor = self.db.conn.execute(f"SELECT * FROM [{table}] WHERE [{pk}] = ?", (value,))
        row = cursor.fetchone()
        if row is None:
            return None
        return as_rows(shape, [c[0] for c in cursor.description], [row])[0]

    def resolve_id(self, table: str, prefix: str, what: str, column: str = "id") -> str:
        """A full id from a unique prefix (any length, as git does)."""
        like = prefix.replace("%", "").replace("_", "") + "%" if prefix else prefix
        rows = self.db.conn.execute(
            f"SELECT {column} FROM [{table}] WHERE {column} = ? OR {column} LIKE ? ORDER BY {column} = ? DESC LIMIT 2",
            (prefix, like, prefix),
        ).fetchall()
        if not rows:
            raise CassetteNotFound(
                f"no {what} {prefix!r} in store {self.location}; check the id or pass --store"
            )
        if len(rows) > 1 and rows[0][0] != prefix:
            raise CassetteNotFound(
                f"{what} id {prefix!r} is ambiguous in store {self.location}; give more characters"
            )
        return str(rows[0][0])
