"""Named queries other layers ask (trainings by spec, proxy sessions by name,
certificates): the SQL they need stays here, behind a method name."""

from __future__ import annotations

import json
from typing import Any

from replaykit.cassette.store.blobs import BlobsMixin


class QueriesMixin(BlobsMixin):
    """Look-ups by something other than a primary key."""

    def find_docs(self, kind: str, config_digest: str) -> list[dict[str, Any]]:
        """Documents of ``kind`` whose ``config_digest`` column matches, oldest first."""
        rows = self.db.conn.execute(
            "SELECT doc FROM runs WHERE kind = ? AND config_digest = ? ORDER BY created_at, id",
            (kind, config_digest),
        ).fetchall()
        return [self.get_json(r[0]) for r in rows]

    def find_trainings(self, spec_digest: str) -> list[dict[str, Any]]:
        """Training documents recorded with this spec (a resumed training is one of them)."""
        return self.find_docs("training", spec_digest)

    def find_proxy_sessions(self, name: str, endpoint: str | None = None) -> list[dict[str, Any]]:
        """Index rows of the proxy sessions called ``name`` (for one upstream endpoint), oldest first."""
        sql, args = "SELECT * FROM cassettes WHERE kind = ? AND task_id = ?", ["proxy", name]
        if endpoint is not None:
            sql, args = sql + " AND endpoint = ?", [*args, endpoint]
        cursor = self.db.conn.execute(sql + " ORDER BY created_at, id", args)
        cols = [c[0] for c in cursor.description]
        return [dict(zip(cols, r, strict=True)) for r in cursor.fetchall()]

    def get_certificate(self, cert_id: str) -> dict[str, Any] | None:
        """A certification row by id (``doc`` decoded), or None. Never creates the table."""
        if not self._has_table("certificates"):
            return None
        row = self._row("certificates", "id", cert_id)
        if row is None:
            return None
        row["doc"] = json.loads(row["doc"]) if row.get("doc") else {}
        return row

    def put_certificate(self, row: dict[str, Any]) -> None:
        with self.write_lock():
            self._table("certificates").insert(row, replace=True)
