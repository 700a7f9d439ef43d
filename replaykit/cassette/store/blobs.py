"""Content-addressed blobs (verified against their address on every read), and the
one-transaction write of blobs plus an index row that episodes and documents use."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from replaykit.cassette.codec import Blobs, put
from replaykit.cassette.integrity import blob_ok
from replaykit.cassette.store.leases import LeasesMixin
from replaykit.cassette.store.schema import SCHEMA, now_iso
from replaykit.core.determinism import canonical_json


class BlobsMixin(LeasesMixin):
    """Blobs by hash; JSON values as blobs."""

    def _write_blobs(self, blobs: Blobs) -> None:
        self.writable()
        self.db.conn.executemany(
            "INSERT OR IGNORE INTO blobs(hash, size, data) VALUES (?, ?, ?)",
            ((h, len(d), d) for h, d in blobs.items()),
        )

    def put_blob(self, data: bytes) -> str:
        blobs: Blobs = {}
        digest = put(blobs, data)
        with self.write_lock():
            self._write_blobs(blobs)
            self._lease_rows("blobs", [digest])
        return digest

    def get_blob(self, digest: str) -> bytes:
        """The blob at ``digest``, verified against its content address."""
        row = self.db.conn.execute("SELECT data, size FROM blobs WHERE hash = ?", (digest,)).fetchone()
        if row is None:
            raise self.corrupt(f"blob {str(digest)[:12]}… is missing (re-import its bundle)")
        data = bytes(row[0]) if row[0] is not None else b""
        if not blob_ok(digest, data, row[1]):
            raise self.corrupt(f"blob {digest[:12]}… does not match its content address")
        return data

    def has_blob(self, digest: str) -> bool:
        return self.db.conn.execute("SELECT 1 FROM blobs WHERE hash = ?", (digest,)).fetchone() is not None

    def put_json(self, value: Any) -> str:
        return self.put_blob(canonical_json(value).encode("utf-8"))

    def get_json(self, digest: str) -> Any:
        return json.loads(self.get_blob(digest))

    def _write_row(self, table: str, row: Mapping[str, object], blobs: Blobs) -> None:
        """Blobs + one row in one transaction; ``created_at`` is set once, at first write."""
        pk = SCHEMA[table]["pk"]
        self.writable()
        with self.write_lock():
            self._write_blobs(blobs)
            old = self.db.conn.execute(
                f"SELECT created_at FROM [{table}] WHERE [{pk}] = ?", (row[pk],)
            ).fetchone()
            created_at = old[0] if old and old[0] else now_iso()
            self.db.table(table).insert({**row, "created_at": created_at}, replace=True)
            self._lease_rows(table, [str(row[pk])])
