"""Every SQLite failure of a store becomes one line: ``store corrupt: …`` for damage (a
text column that is not UTF-8, a malformed page), a line naming the path and its free
space for a full disk, a clear I/O line otherwise — never a ``sqlite3`` traceback.

The store opens its connection with :class:`GuardedConnection`, whose cursors translate
the errors of ``execute`` and of every fetch (SQLite decodes text columns while rows
are fetched, so a damaged column fails there, not in ``execute``).
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from replaykit.core.errors import ANOTHER_STORE, StoreCorrupt, StoreError

#: what the library raises when a write needs more room than the disk has
DISK_FULL = ("database or disk is full", "disk is full")
#: below this much free space, SQLite's "disk I/O error" (it could not grow a journal) is a full disk
LOW_SPACE = 1 << 20
CORRUPT = ("malformed", "could not decode", "file is encrypted", "corrupt")


def free_bytes(path: Path) -> int | None:
    """Free space on the file system holding ``path`` (or its nearest existing parent)."""
    for folder in (path, *path.parents):
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return None


def human(n: int | None) -> str:
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{int(size)} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"


class DiskFull(StoreError):
    """The disk holding the store has no room for a write (nothing was written)."""


def translate(exc: sqlite3.Error, root: Path) -> StoreError:
    """The one-line error for a SQLite failure on the store at ``root``."""
    text = " ".join(str(exc).split())
    low = text.lower()
    index = root / "index.db"
    free = free_bytes(root)
    full = any(k in low for k in DISK_FULL) or getattr(exc, "sqlite_errorcode", None) == 13  # SQLITE_FULL
    if full or ("disk i/o error" in low and free is not None and free < LOW_SPACE):
        return DiskFull(
            f"disk full: {index} cannot be written ({human(free)} free there); nothing was changed"
            f" — free space (`replaykit gc --store {root}` and `cassettes rm` work on a full disk) or pass another --store"
        )
    if "could not decode" in low:  # random bytes in a text column: name the column, not the bytes
        column = re.search(r"column '([^']*)'", text)
        name = f" {column.group(1)!r}" if column else ""
        return StoreCorrupt(f"a text column{name} of index.db holds bytes that are not UTF-8", "", str(root))
    if "not a database" in low:
        return StoreError(
            f"cannot open store {root}: {index} is not a SQLite database; check the path or pass --store"
        )
    if any(k in low for k in CORRUPT):
        return StoreCorrupt(f"index.db is damaged ({text[:120]})", "", str(root))
    if "readonly database" in low or (
        ("unable to open" in low or "disk i/o error" in low) and not _writable(root, index)
    ):
        return StoreError(
            f"store {index} is read-only for this process ({text[:80]}): check the permissions and owner "
            f"of {root} and its files (ls -l), or that its filesystem is not mounted read-only; {ANOTHER_STORE}"
        )
    if "disk i/o error" in low or "unable to open" in low:
        return StoreError(
            f"I/O error on store {index}: {text[:120]} ({human(free_bytes(root))} free); check the disk and the path"
        )
    return StoreError(f"store {index}: {type(exc).__name__}: {text[:160]}")


def _writable(root: Path, index: Path) -> bool:
    """Whether this process may write the store's folder and index (where they exist)."""
    return all(os.access(p, os.W_OK) for p in (root, index) if p.exists())


class GuardedCursor(sqlite3.Cursor):
    """A cursor whose failures are :func:`translate`-d (``StoreError``), never ``sqlite3`` errors."""

    def _fail(self, exc: sqlite3.Error) -> StoreError:
        conn = self.connection
        return translate(exc, Path(getattr(conn, "root", ".")))

    def execute(self, sql: str, parameters: Any = (), /) -> GuardedCursor:
        try:
            super().execute(sql, parameters)
        except sqlite3.Error as exc:
            if "locked" in str(exc) or "busy" in str(exc):  # retry_locked waits these out
                raise
            raise self._fail(exc) from None
        return self

    def executemany(self, sql: str, seq: Iterable[Any], /) -> GuardedCursor:
        try:
            super().executemany(sql, seq)
        except sqlite3.Error as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            raise self._fail(exc) from None
        return self

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.Error as exc:
            raise self._fail(exc) from None

    def fetchmany(self, size: int | None = None) -> list[Any]:
        try:
            return super().fetchmany(self.arraysize if size is None else size)
        except sqlite3.Error as exc:
            raise self._fail(exc) from None

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.Error as exc:
            raise self._fail(exc) from None

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.Error as exc:
            raise self._fail(exc) from None


class GuardedConnection(sqlite3.Connection):
    """A connection whose ``execute``/``executemany`` go through :class:`GuardedCursor`."""

    root: Path = Path(".")

    def cursor(self, factory: Any = GuardedCursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> GuardedCursor:
        cursor: GuardedCursor = self.cursor()
        return cursor.execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> GuardedCursor:
        cursor: GuardedCursor = self.cursor()
        return cursor.executemany(sql, parameters)


def connect(target: str, root: Path, **kwargs: Any) -> GuardedConnection:
    """``sqlite3.connect`` with the guard, its errors already translated."""
    try:
        conn = sqlite3.connect(target, factory=GuardedConnection, **kwargs)
    except sqlite3.Error as exc:
        raise translate(exc, root) from None
    assert isinstance(conn, GuardedConnection)
    conn.root = root
    return conn
