"""``dirstore:PATH``: a replaykit store backend that keeps each table as one JSON file in a
folder — a driver written from scratch against ``replaykit.cassette.store.driver`` (the
public driver protocol, docs/api.md) and nothing else of replaykit's store.

A write transaction holds an exclusive ``flock`` on ``PATH/lock``, works on the tables in
memory and, on success, replaces each changed table's file atomically and bumps
``PATH/version``; a failed one changes nothing. Reads outside a transaction read the files
as committed. Slow for big stores (every commit rewrites the tables it changed): a test
backend, not a product.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from replaykit.cassette.store.driver import AnyOf, Conflict, Order, Prefix, Row, Value, Where
from replaykit.cassette.store.schema import TABLES, key_columns
from replaykit.core.errors import StoreError

Table = dict[str, Row]  # the key's JSON -> the row


def _encode(row: Mapping[str, Value]) -> dict[str, Any]:
    return {k: {"$b": base64.b64encode(v).decode()} if isinstance(v, bytes) else v for k, v in row.items()}


def _decode(row: Mapping[str, Any]) -> Row:
    return {k: base64.b64decode(v["$b"]) if isinstance(v, dict) else v for k, v in row.items()}


def _matches(row: Row, where: Where | None) -> bool:
    for column, want in (where or {}).items():
        value = row.get(column)
        if isinstance(want, Prefix):
            if not isinstance(value, str) or not value.startswith(want.text):
                return False
        elif isinstance(want, AnyOf):
            if value not in want.values:
                return False
        elif value != want:
            return False
    return True


def _sort_key(value: Value) -> tuple[int, Any]:
    return (0, "") if value is None else (1, value)  # NULL first, as SQLite sorts


class DirStore:
    """The store in a folder of JSON tables."""

    def __init__(self, location: str, readonly: bool = False) -> None:
        path = location.removeprefix("dirstore:")
        path = path[2:] if path.startswith("//") else path
        self.root = Path(path).expanduser()
        self.readonly = readonly
        self._depth = 0
        self._state: dict[str, Table] | None = None  # the tables inside a transaction
        self._dirty: set[str] = set()
        self._lock: Any = None

    @property
    def location(self) -> str:
        return f"dirstore:{self.root}"

    @property
    def local_dir(self) -> Path:
        return self.root

    def exists(self) -> bool:
        return (self.root / "version").is_file()

    def reopen(self, readonly: bool) -> DirStore:
        return DirStore(self.location, readonly)

    def close(self) -> None:
        return None

    # -- files --------------------------------------------------------------------------
    def _ready(self) -> None:
        if self.exists():
            return
        if self.readonly:
            raise StoreError(f"no store at {self.location}; check --store")
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "version").write_text("0")

    def _load(self, table: str) -> Table:
        if table not in TABLES:
            raise StoreError(f"unknown store table {table!r}")
        if self._state is not None:
            if table not in self._state:
                self._state[table] = self._read(table)
            return self._state[table]
        self._ready()
        return self._read(table)

    def _read(self, table: str) -> Table:
        path = self.root / f"{table}.json"
        if not path.exists():
            return {}
        return {k: _decode(r) for k, r in json.loads(path.read_text()).items()}

    def _write(self, table: str, rows: Table) -> None:
        path = self.root / f"{table}.json"
        tmp = path.with_name(f".{table}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({k: _encode(r) for k, r in rows.items()}))
        os.replace(tmp, path)

    # -- the primitives -----------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self._depth:  # nested: a savepoint of the tables as they are
            saved, dirty = copy.deepcopy(self._state), set(self._dirty)
            self._depth += 1
            try:
                yield
            except BaseException:
                self._state, self._dirty = saved, dirty
                raise
            finally:
                self._depth -= 1
            return
        if self.readonly:
            raise StoreError(f"store {self.location} is read-only")
        self._ready()
        with open(self.root / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # writers take turns
            self._state, self._dirty, self._depth = {}, set(), 1
            try:
                yield
                for table in sorted(self._dirty):
                    self._write(table, self._state[table])
                if self._dirty:
                    version = self.root / "version"
                    version.write_text(str(int(version.read_text() or 0) + 1))
            finally:
                self._state, self._dirty, self._depth = None, set(), 0
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        if self._depth:
            yield
        else:
            with self.transaction():
                yield

    def insert(self, table: str, rows: Sequence[Mapping[str, Value]], conflict: Conflict = "error") -> None:
        key = key_columns(TABLES[table])
        with self._writing():
            stored = self._load(table)
            for row in rows:
                k = json.dumps([row.get(c) for c in key])
                if k in stored and conflict == "ignore":
                    continue
                if k in stored and conflict == "error":
                    raise StoreError(f"store {self.location}: {table} already holds {k}")
                stored[k] = {c: row.get(c) for c in TABLES[table]["columns"]}
            self._dirty.add(table)

    def select(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        where: Where | None = None,
        order: Order = (),
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Row]:
        if self._state is None and not self.exists():
            if self.readonly:
                raise StoreError(f"no store at {self.location}; check --store")
            return []
        rows = [r for r in self._load(table).values() if _matches(r, where)]
        for column, descending in reversed(order):  # stable sorts, least significant first

            def by(row: Row, column: str = column) -> tuple[int, Any]:
                return _sort_key(row.get(column))

            rows.sort(key=by, reverse=descending)
        rows = rows[offset : None if limit is None else offset + limit]
        return [dict(r) if columns is None else {c: r.get(c) for c in columns} for r in rows]

    def count(self, table: str, where: Where | None = None) -> int:
        return len(self.select(table, where=where))

    def distinct(
        self, table: str, column: str, where: Where | None = None, limit: int | None = None
    ) -> list[Value]:
        values = sorted({r[column] for r in self.select(table, [column], where)}, key=_sort_key)
        return values if limit is None else values[:limit]

    def delete(self, table: str, where: Where) -> int:
        with self._writing():
            stored = self._load(table)
            gone = [k for k, r in stored.items() if _matches(r, where)]
            for k in gone:
                del stored[k]
            self._dirty.add(table)
        return len(gone)

    def version(self) -> str:
        path = self.root / "version"
        return path.read_text() if path.exists() else "0"

    @contextlib.contextmanager
    def room_to_remove(self) -> Iterator[None]:
        yield

    def compact(self) -> dict[str, object]:
        return {
            "compacted": False,
            "note": "a dirstore rewrites its tables on every commit: nothing to compact",
        }
