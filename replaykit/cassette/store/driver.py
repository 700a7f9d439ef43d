"""The store driver: the primitives a backend implements; the store is written once above them.

A backend is a *driver* over tables of rows (``schema.TABLES``: their columns, key and
indexes): it selects, counts, inserts and deletes rows matched by a small :data:`Where`
(equality, a :class:`Prefix`, :class:`AnyOf` some values), runs one write transaction at
a time, and says when anything changed. Everything else — content addressing, verifying
every read, episode and document codecs, leases, listings — is :class:`~replaykit.cassette.store.Store`'s,
the same for every backend. Built in: SQLite (``sqlite.py``) and PostgreSQL (``postgres.py``);
another package adds one with :func:`replaykit.cassette.stores.register_store` or a
``replaykit.stores`` entry point (``tests/store_plugin/`` is one written from scratch).

A driver may also implement :class:`DocumentReads`: a row and the blobs its document names
in one round trip (PostgreSQL reads an episode in one query that way); without it the store
asks for them in three.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

#: one value of a stored row: text, numbers, a blob's bytes, or NULL
Value = str | int | float | bytes | None
Row = dict[str, Value]
#: what ``insert`` does with a row whose key is already stored
Conflict = Literal["error", "ignore", "replace"]


@dataclass(frozen=True)
class Prefix:
    """Matches the text values starting with ``text`` (an id given by its first characters)."""

    text: str

    def bounds(self) -> tuple[str, str | None]:
        """``[low, high)`` in code-point order holding exactly the values with this prefix
        (``high`` None: no upper bound); an index on the column serves it."""
        text = self.text
        while text and text[-1] == "\U0010ffff":
            text = text[:-1]
        if not text:
            return self.text, None
        return self.text, text[:-1] + chr(ord(text[-1]) + 1)


@dataclass(frozen=True)
class AnyOf:
    """Matches the values equal to one of ``values`` (none: matches nothing)."""

    values: tuple[Value, ...]


Match = Value | Prefix | AnyOf
#: column -> what its value must match, all of them (a plain value: equality; None: NULL)
Where = Mapping[str, Match]
#: (column, descending) pairs, most significant first
Order = Sequence[tuple[str, bool]]


@runtime_checkable
class StoreDriver(Protocol):
    """What a store backend implements: twelve primitives over the tables of ``schema.TABLES``.

    Opening is lazy and a read-only driver never creates nor writes anything (a table it
    does not find reads as empty). A writable one creates the tables and indexes it lacks.
    Failures are one-line :class:`~replaykit.core.errors.StoreError` (damage:
    :class:`~replaykit.core.errors.StoreCorrupt`), never a library's traceback.
    """

    readonly: bool

    @property
    def location(self) -> str:
        """What ``open_store`` reopens the store from and messages name (never a password)."""
        ...

    @property
    def local_dir(self) -> Path:
        """A folder on this machine for the store's caches (materialised harness trees)."""
        ...

    def exists(self) -> bool:
        """Whether the store is there (checking never creates it)."""
        ...

    def reopen(self, readonly: bool) -> StoreDriver:
        """A new connection to the same store (another thread, a read-only view)."""
        ...

    def close(self) -> None: ...

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """One write transaction, taken up front (writers wait their turn): what is read
        inside cannot change before what is written inside commits. Nested: a savepoint."""
        ...

    def insert(self, table: str, rows: Sequence[Mapping[str, Value]], conflict: Conflict = "error") -> None:
        """Rows (each with every column it sets); a stored key is an error, left alone or replaced."""
        ...

    def select(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        where: Where | None = None,
        order: Order = (),
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Row]:
        """The rows matching ``where`` (``columns`` of them; None: all), in ``order``."""
        ...

    def count(self, table: str, where: Where | None = None) -> int: ...

    def distinct(
        self, table: str, column: str, where: Where | None = None, limit: int | None = None
    ) -> list[Value]:
        """The distinct values of ``column`` among the rows matching ``where``, ascending (NULL
        first), the first ``limit`` of them; with an index on (the ``where`` columns, ``column``)
        the cost grows with the values returned, not with the rows."""
        ...

    def delete(self, table: str, where: Where) -> int:
        """Delete the rows matching ``where``; how many were."""
        ...

    def version(self) -> str:
        """A token that changes with every commit to the store, this process's and others'."""
        ...

    def room_to_remove(self) -> contextlib.AbstractContextManager[None]:
        """Inside, deleting works on a full disk (a backend on a server: nothing to do)."""
        ...

    def compact(self) -> dict[str, object]:
        """Give freed space back where the backend can; says what it did (``compacted``, ``note``)."""
        ...


@runtime_checkable
class DocumentReads(Protocol):
    """Optional: a row and the blobs its document names, in one round trip."""

    def read_document(self, table: str, key: Where, doc_column: str) -> tuple[Row, dict[str, Row]] | None:
        """The row matching ``key`` and the ``blobs`` rows of its ``doc_column`` blob and of every
        quoted sha256 that blob's text holds (:data:`DIGEST_IN_DOC`); None: no such row."""
        ...


#: a blob reference inside a stored JSON document: a quoted sha256
DIGEST_IN_DOC = re.compile(rb'"([0-9a-f]{64})"')


def referenced_digests(doc: bytes) -> list[str]:
    """The blob addresses a stored document's JSON may reference, in first-seen order."""
    return list(dict.fromkeys(m.decode("ascii") for m in DIGEST_IN_DOC.findall(doc)))


__all__ = [
    "DIGEST_IN_DOC",
    "AnyOf",
    "Conflict",
    "DocumentReads",
    "Match",
    "Order",
    "Prefix",
    "Row",
    "StoreDriver",
    "Value",
    "Where",
    "referenced_digests",
]
