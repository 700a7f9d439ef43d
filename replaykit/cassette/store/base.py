"""A store over its driver: opening and closing, the one write transaction, refusing
writes when read-only, one row by key, ids by unique prefix, disk space — the plumbing
every part of :class:`~replaykit.cassette.store.Store` uses, whatever the backend."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Self, TypeVar, cast

from replaykit.cassette.store.driver import Prefix, StoreDriver
from replaykit.cassette.store.sqlite import SqliteDriver
from replaykit.core.errors import CassetteNotFound, StoreCorrupt, StoreError

if TYPE_CHECKING:
    from replaykit.cassette.lineage import ReuseCounts
    from replaykit.cassette.store.schema import CassetteColumns

T = TypeVar("T")


class StoreBase:
    """The store at ``where``: a folder (SQLite, the default backend) or another driver."""

    def __init__(self, where: Path | str | StoreDriver, readonly: bool = False) -> None:
        self.driver: StoreDriver = SqliteDriver(where, readonly) if isinstance(where, (str, Path)) else where
        self.readonly = self.driver.readonly
        #: cassette id -> (doc hash, derived columns, what its reuse claim counts)
        self._checked: dict[str, tuple[str, CassetteColumns, ReuseCounts]] = {}
        self._scratch: Path | None = None
        self._derived: dict[Hashable, tuple[str, object]] = {}  # what listings derive, per change token

    def _per_change(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, kept until anyone commits to the store (its change token moves)."""
        token = self.driver.version()
        held = self._derived.get(key)
        if held is not None and held[0] == token:
            return cast(T, held[1])
        value = compute()
        if len(self._derived) >= 64:  # a few pages' worth: drop the oldest
            self._derived.pop(next(iter(self._derived)))
        self._derived[key] = (token, value)
        return value

    @property
    def root(self) -> Path:
        """This machine's folder of the store: the store itself (SQLite) or its local caches."""
        return self.driver.local_dir

    @property
    def location(self) -> str:
        """What ``open_store`` reopens this store from (and messages name; never a password)."""
        return self.driver.location

    def reopen(self, readonly: bool | None = None) -> Self:
        """A new connection to the same store (e.g. for another thread)."""
        return type(self)(self.driver.reopen(self.readonly if readonly is None else readonly))

    def exists(self) -> bool:
        """Whether the store is there (checking never creates one)."""
        return self.driver.exists()

    def close(self) -> None:
        self.driver.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """One write transaction taken up front (waiting out another writer): what is read
        inside cannot change before what is written inside commits. Nested inside another
        transaction it is a savepoint of that one."""
        self.writable()
        with self.driver.transaction():
            yield

    def writable(self) -> None:
        """Refuse a write through a read-only store (replay, audit, listings, export)."""
        if self.readonly:
            raise StoreError(
                f"store {self.location} is open read-only (replay, audit and listings never write)"
            )

    def corrupt(self, what: str, where: str = "") -> StoreCorrupt:
        return StoreCorrupt(what, where, self.location)

    def _row(self, shape: type[T], table: str, pk: str, value: str) -> T | None:
        """One row by primary key, typed as ``shape`` (the table's row TypedDict)."""
        rows = self.driver.select(table, where={pk: value}, limit=1)
        return cast(T, rows[0]) if rows else None

    def resolve_id(self, table: str, prefix: str, what: str, column: str = "id") -> str:
        """A full id from a unique prefix (any length, as git does)."""
        exact = self.driver.select(table, [column], {column: prefix}, limit=1) if prefix else []
        rows = exact or (
            self.driver.select(table, [column], {column: Prefix(prefix)}, [(column, False)], limit=2)
            if prefix
            else []
        )
        if not rows:
            raise self._not_found(table, prefix, what)
        if len(rows) > 1:
            raise CassetteNotFound(
                f"{what} id {prefix!r} is ambiguous in store {self.location}; give more characters"
            )
        return str(rows[0][column])

    def _not_found(self, table: str, prefix: str, what: str) -> CassetteNotFound:
        """Nothing in ``table`` has this id: say what it is when it names a stored document of
        another table (a training's id given for a cassette), else that it is not there."""
        if table == "cassettes" and prefix:
            other = self.driver.select(
                "runs", ["id", "kind"], {"id": Prefix(prefix)}, [("id", False)], limit=2
            )
            if len(other) == 1:
                full, kind = str(other[0]["id"]), str(other[0]["kind"])
                see = (
                    f"`replaykit cassettes ls --run {full}` lists its cassettes"
                    if kind in ("measure", "fork")
                    else f"`replaykit report {full}` shows it"
                )
                named = {"measure": "run", "compare": "compare result"}.get(kind, kind)
                return CassetteNotFound(f"{prefix!r} is a {named}, not a cassette: {see}")
        return CassetteNotFound(f"no {what} {prefix!r} in store {self.location}; check the id")

    # -- disk space: removal works on a full disk; compaction only with room ------------
    def room_to_remove(self) -> contextlib.AbstractContextManager[None]:
        """Inside, deletions have room even on a full disk (``gc``, ``cassettes rm``)."""
        return self.driver.room_to_remove()

    def compact(self) -> dict[str, object]:
        """Give freed space back where the backend can (says what it did, and why not)."""
        return self.driver.compact()
