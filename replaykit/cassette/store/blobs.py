"""Content-addressed blobs (verified against their address on every read, one at a time or
many in one query), the one-transaction write of blobs plus an index row that episodes and
documents use, and a document read with the blobs it names."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from replaykit.cassette.integrity import blob_ok
from replaykit.cassette.store.driver import AnyOf, DocumentReads, Row, referenced_digests
from replaykit.cassette.store.leases import LeasesMixin
from replaykit.cassette.store.schema import SCHEMA, now_iso
from replaykit.core.determinism import canonical_json

if TYPE_CHECKING:
    from replaykit.cassette.codec import Blobs

#: keys per ``IN (…)`` of one query (SQLite allows 32,766 parameters; PostgreSQL 65,535)
CHUNK = 500


class BlobsMixin(LeasesMixin):
    """Blobs by hash; JSON values as blobs."""

    def _write_blobs(self, blobs: Blobs) -> None:
        self.writable()
        rows: list[Row] = [{"hash": h, "size": len(d), "data": d} for h, d in blobs.items()]
        self.driver.insert("blobs", rows, conflict="ignore")

    def put_blob(self, data: bytes) -> str:
        from replaykit.cassette.codec import put  # the episode codec: loaded for a write

        blobs: Blobs = {}
        digest = put(blobs, data)
        with self.write_lock():
            self._write_blobs(blobs)
            self._lease_rows("blobs", [digest])
        return digest

    def _verified(self, digest: str, row: Row | None) -> bytes:
        if row is None:
            raise self.corrupt(f"blob {str(digest)[:12]}… is missing (re-import its bundle)")
        raw = row["data"]
        data = raw if isinstance(raw, bytes) else b"" if raw is None else str(raw).encode("utf-8")
        size = row["size"]
        if not blob_ok(digest, data, size if isinstance(size, int) else None):
            raise self.corrupt(f"blob {digest[:12]}… does not match its content address")
        return data

    def get_blob(self, digest: str) -> bytes:
        """The blob at ``digest``, verified against its content address."""
        rows = self.driver.select("blobs", ["data", "size"], {"hash": digest}, limit=1)
        return self._verified(digest, rows[0] if rows else None)

    def _blob_rows(self, digests: Iterable[str]) -> dict[str, Row]:
        """The stored rows of these blobs (those there), a few queries for any number."""
        wanted = list(dict.fromkeys(digests))
        found: dict[str, Row] = {}
        for i in range(0, len(wanted), CHUNK):
            chunk = tuple(wanted[i : i + CHUNK])
            for row in self.driver.select("blobs", ["hash", "data", "size"], {"hash": AnyOf(chunk)}):
                found[str(row["hash"])] = row
        return found

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """Many blobs at once, each verified against its content address (a missing one is corruption)."""
        wanted = list(dict.fromkeys(digests))
        rows = self._blob_rows(wanted)
        return {d: self._verified(d, rows.get(d)) for d in wanted}

    def has_blob(self, digest: str) -> bool:
        return bool(self.driver.select("blobs", ["hash"], {"hash": digest}, limit=1))

    def put_json(self, value: Any) -> str:
        return self.put_blob(canonical_json(value).encode("utf-8"))

    def get_json(self, digest: str) -> Any:
        return json.loads(self.get_blob(digest))

    def _read_document(
        self, table: str, key: str, doc_column: str = "doc"
    ) -> tuple[Row, Callable[[str], bytes]] | None:
        """A row by primary key, and a reader of the blobs its document names: they come with the
        row (one round trip where the driver can, three otherwise); each is verified as it is
        read, and one the document names that did not come is read on its own."""
        pk = SCHEMA[table]["pk"]
        if isinstance(self.driver, DocumentReads):
            found = self.driver.read_document(table, {pk: key}, doc_column)
            if found is None:
                return None
            row, blobs = found
        else:
            rows = self.driver.select(table, where={pk: key}, limit=1)
            if not rows:
                return None
            row = rows[0]
            blobs = self._blob_rows([str(row[doc_column])])
            doc = blobs.get(str(row[doc_column]))
            if doc is not None and isinstance(doc["data"], bytes):
                blobs.update(self._blob_rows(referenced_digests(doc["data"])))

        def read(digest: str) -> bytes:
            return self._verified(digest, blobs[digest]) if digest in blobs else self.get_blob(digest)

        return row, read

    def _write_row(self, table: str, row: Mapping[str, object], blobs: Blobs) -> None:
        """Blobs + one row in one transaction; ``created_at`` is set once, at first write."""
        pk = SCHEMA[table]["pk"]
        self.writable()
        with self.write_lock():
            self._write_blobs(blobs)
            old = self.driver.select(table, ["created_at"], {pk: str(row[pk])}, limit=1)
            created_at = old[0]["created_at"] if old and old[0]["created_at"] else now_iso()
            stored = cast(Row, {**row, "created_at": created_at})  # the table's columns (schema.SCHEMA)
            self.driver.insert(table, [stored], conflict="replace")
            self._lease_rows(table, [str(row[pk])])
