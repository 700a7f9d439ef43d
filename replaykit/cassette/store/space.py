"""Disk space: a writable store keeps a small reserve file beside ``index.db`` so that
``gc`` and ``cassettes rm`` (the way to free space) still run on a full disk — they give
the reserve back first, delete, and compact (``VACUUM``) only when there is room for it.
A write that finds the disk full fails whole with one line naming the path and the free
space (:mod:`~replaykit.cassette.store.guard`); SQLite's journal keeps the store intact.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from replaykit.cassette.store.base import StoreBase
from replaykit.cassette.store.guard import free_bytes
from replaykit.cassette.store.schema import INDEX

RESERVE = "reserve.bin"
RESERVE_BYTES = 1 << 20
#: a reserve is (re)made only while this much more than it is free
MARGIN = 3 * RESERVE_BYTES


class SpaceMixin(StoreBase):
    """The reserve file; removal's room to write; compaction only with room."""

    def _opened(self) -> None:
        self.ensure_reserve()

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
        conn = self.db.conn
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
        conn = self.db.conn
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
