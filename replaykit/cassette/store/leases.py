"""Leases: what a live writer is about to reference, so ``gc`` and ``cassettes rm`` keep it.

A ``run`` stores its harness tree before any document names it, and a ``train`` stores
verdicts, candidate trees and its git bundle before its training document does. Inside
``with store.leasing():`` every tree, cassette, document and blob the store writes (and
whatever the writer names with :meth:`LeasesMixin.lease`) is leased *in the same
transaction* as the write, so there is no moment at which ``gc`` can see it
unreferenced. Leases end when the outermost ``leasing()`` exits; a lease whose process
has died (same host, pid gone) is ignored and dropped by the next ``gc``.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterable, Iterator

from replaykit.cassette.store.base import StoreBase
from replaykit.cassette.store.driver import AnyOf, Row


def _host() -> str:
    import socket  # here: opening a store to read it never needs the network module

    return socket.gethostname()


LEASE_TABLE = "leases"
#: a lease taken on another host (a shared store folder) counts as live this long
FOREIGN_LEASE_S = 24 * 3600.0
LEASABLE = ("runs", "cassettes", "trees", "blobs")


def _alive(host: str, pid: int, taken: float) -> bool:
    if host != _host():
        return time.time() - taken < FOREIGN_LEASE_S
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LeasesMixin(StoreBase):
    """The ``leases`` table (absent in an older store opened read-only: no lease)."""

    _lease_depth = 0
    _lease_owner: str | None = None
    _leases_written = False  # this store object wrote a lease row (else there is nothing to release)

    @contextlib.contextmanager
    def leasing(self) -> Iterator[None]:
        """Lease everything written inside (nested scopes share the outermost one)."""
        self.writable()
        if self._lease_owner is None:
            self._lease_owner = f"{_host()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._lease_depth += 1
        try:
            yield
        finally:
            self._lease_depth -= 1
            if self._lease_depth == 0:
                self.release_leases()

    @property
    def is_leasing(self) -> bool:
        return self._lease_depth > 0

    def _lease_rows(self, table: str, keys: Iterable[str]) -> None:
        """Insert lease rows (call inside the write transaction of what they protect)."""
        if not self.is_leasing or self._lease_owner is None:
            return
        host, pid, now = _host(), os.getpid(), time.time()
        rows: list[Row] = [
            {"owner": self._lease_owner, "tbl": table, "key": str(k), "host": host, "pid": pid, "taken": now}
            for k in keys
        ]
        self.driver.insert(LEASE_TABLE, rows, conflict="ignore")
        self._leases_written = True

    def lease(self, table: str, keys: Iterable[str]) -> None:
        """Lease rows of ``table`` (``runs``, ``cassettes``, ``trees``, ``blobs``) this writer
        is about to reference (inside ``leasing()``; a no-op outside). Keys need not exist yet."""
        if table not in LEASABLE:
            raise ValueError(f"cannot lease rows of {table!r}")
        if not self.is_leasing:
            return
        keys = list(keys)
        with self.write_lock():
            self._lease_rows(table, keys)

    def release_leases(self) -> None:
        """Drop this store object's leases."""
        if self._lease_owner is None or self.readonly or not self._leases_written:
            return  # none written: nothing to release (a store that refused the first write)
        with self.write_lock():
            self.driver.delete(LEASE_TABLE, {"owner": self._lease_owner})

    def leased(self, prune: bool = False) -> dict[str, dict[str, str]]:
        """Live leases: table → {key: who holds it}; ``prune`` (inside ``write_lock``) drops dead ones."""
        out: dict[str, dict[str, str]] = {t: {} for t in LEASABLE}
        if not self.exists():
            return out
        dead: set[str] = set()
        for row in self.driver.select(LEASE_TABLE):
            owner, table, key, host, pid = (str(row[c]) for c in ("owner", "tbl", "key", "host", "pid"))
            if owner in dead or not _alive(host, int(pid), float(row["taken"] or 0)):
                dead.add(owner)
                continue
            if table in out:
                out[table][key] = f"pid {pid}" + (f" on {host}" if host != _host() else "")
        if prune and dead and not self.readonly:
            self.driver.delete(LEASE_TABLE, {"owner": AnyOf(tuple(sorted(dead)))})
        return out
