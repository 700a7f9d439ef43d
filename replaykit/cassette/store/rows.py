"""Rows of the core tables as stored, for bundles (export, import) and garbage
collection: ``replaykit.exchange`` decides what to copy or remove, these only execute."""

from __future__ import annotations

import contextlib
from typing import Any, Iterable, Iterator, cast

from replaykit.cassette.store.blobs import CHUNK, BlobsMixin
from replaykit.cassette.store.driver import AnyOf, Row
from replaykit.cassette.store.schema import SCHEMA, Cell
from replaykit.core.errors import StoreError


def _core(table: str) -> str:
    """The primary key of a core table (``runs``, ``cassettes``, ``trees``, ``blobs``)."""
    if table not in SCHEMA:
        raise StoreError(f"unknown store table {table!r}")
    return SCHEMA[table]["pk"]


class RowsMixin(BlobsMixin):
    """Core-table rows by primary key; write transactions."""

    # -- removal (replaykit.exchange.gc decides what; these only execute) ------------
    def index_rows(self, table: str, columns: str) -> list[tuple[Any, ...]]:
        """``columns`` (comma-separated) of every row of a core table."""
        _core(table)
        names = [c.strip() for c in columns.split(",")]
        return [tuple(r[c] for c in names) for r in self.driver.select(table, names)]

    def delete_rows(self, table: str, keys: Iterable[str]) -> int:
        """Delete rows of a core table by primary key (call inside ``write_lock()``)."""
        pk = _core(table)
        wanted = list(keys)
        return sum(
            self.driver.delete(table, {pk: AnyOf(tuple(wanted[i : i + CHUNK]))})
            for i in range(0, len(wanted), CHUNK)
        )

    # -- rows, for bundles (export and import) ------------------------------------------
    def get_row(self, table: str, key: str) -> dict[str, Cell] | None:
        """One row of a core table by primary key, as stored (a blob is read with ``get_blob``)."""
        if table not in SCHEMA or table == "blobs":
            raise StoreError(f"no rows of store table {table!r} (one of runs, cassettes, trees)")
        return self._row(dict[str, Cell], table, SCHEMA[table]["pk"], key)

    def present(self, table: str, keys: list[str], column: str | None = None) -> dict[str, Cell]:
        """Of ``keys``, those present in a core table → their ``column`` (or True)."""
        pk = _core(table)
        if not self.exists():
            return {}
        found: dict[str, Cell] = {}
        for i in range(0, len(keys), CHUNK):
            names = [pk, column] if column and column != pk else [pk]
            for r in self.driver.select(table, names, {pk: AnyOf(tuple(keys[i : i + CHUNK]))}):
                found[str(r[pk])] = cast(Cell, r[column]) if column else True
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
        _core(table)
        self.writable()
        self.driver.insert(table, cast(list[Row], rows))
