"""Rows of the core tables as stored, for bundles (export, import) and garbage
collection: ``replaykit.exchange`` decides what to copy or remove, these only execute."""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator

from replaykit.cassette.store.blobs import BlobsMixin
from replaykit.cassette.store.schema import SCHEMA, Cell
from replaykit.core.errors import StoreError


class RowsMixin(BlobsMixin):
    """Core-table rows by primary key; write transactions."""

    # -- removal (replaykit.exchange.gc decides what; these only execute) ------------
    def index_rows(self, table: str, columns: str) -> list[tuple[Any, ...]]:
        """``columns`` of every row of a core table (``runs``, ``cassettes``, ``trees``, ``blobs``)."""
        if table not in SCHEMA:
            raise StoreError(f"unknown store table {table!r}")
        return [tuple(r) for r in self.db.conn.execute(f"SELECT {columns} FROM [{table}]")]

    def delete_rows(self, table: str, keys: Iterable[str]) -> int:
        """Delete rows of a core table by primary key (call inside ``write_lock()``)."""
        if table not in SCHEMA:
            raise StoreError(f"unknown store table {table!r}")
        pk = SCHEMA[table]["pk"]
        cursor = self.db.conn.executemany(f"DELETE FROM [{table}] WHERE [{pk}] = ?", ((k,) for k in keys))
        return int(cursor.rowcount)

    # -- rows, for bundles (export and import) ------------------------------------------
    def get_row(self, table: str, key: str) -> dict[str, Cell] | None:
        """One row of a core table by primary key, as stored (a blob is read with ``get_blob``)."""
        if table not in SCHEMA or table == "blobs":
            raise StoreError(f"no rows of store table {table!r} (one of runs, cassettes, trees)")
        return self._row(dict[str, Cell], table, SCHEMA[table]["pk"], key)

    def present(self, table: str, keys: list[str], column: str | None = None) -> dict[str, Cell]:
        """Of ``keys``, those present in a core table → their ``column`` (or True)."""
        if table not in SCHEMA:
            raise StoreError(f"unknown store table {table!r}")
        if not self.exists():
            return {}
        pk = SCHEMA[table]["pk"]
        value = f"[{column}]" if column else "1"
        found: dict[str, Cell] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            sql = f"SELECT [{pk}], {value} FROM [{table}] WHERE [{pk}] IN ({','.join('?' * len(chunk))})"
            found.update((str(r[0]), r[1]) for r in self.db.conn.execute(sql, chunk))
        return found

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction: everything inside commits together or not at all."""
        with self.write_lock():
            yield

    def insert_blobs(self, blobs: dict[str, bytes]) -> None:
        """Content-addressed blobs (``hash → bytes``; present ones are left alone)."""
        self._write_blobs(blobs)

    def insert_rows(self, table: str, rows: list[dict[str, Cell]]) -> None:
        """Rows of a core table, as exported (an existing primary key is an error)."""
        if table not in SCHEMA:
            raise StoreError(f"unknown store table {table!r}")
        if rows:
            self.db.table(table).insert_all(rows, pk=SCHEMA[table]["pk"], alter=True)
