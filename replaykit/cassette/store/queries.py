"""Named queries other layers ask (trainings by spec, proxy sessions by name,
certificates): the SQL they need stays here, behind a method name."""

from __future__ import annotations

import json

from replaykit.cassette.store.blobs import BlobsMixin
from replaykit.cassette.store.schema import CassetteRow, CertificateRecord, CertificateRow, as_rows
from replaykit.core.records import TrainingDocument


class QueriesMixin(BlobsMixin):
    """Look-ups by something other than a primary key."""

    def find_trainings(self, spec_digest: str) -> list[TrainingDocument]:
        """Training documents recorded with this spec (a resumed training is one of them),
        oldest first: the ``runs`` rows of kind ``training`` whose ``config_digest`` is it."""
        rows = self.db.conn.execute(
            "SELECT doc FROM runs WHERE kind = ? AND config_digest = ? ORDER BY created_at, id",
            ("training", spec_digest),
        ).fetchall()
        trainings: list[TrainingDocument] = [self.get_json(r[0]) for r in rows]  # as the trainer stored them
        return trainings

    def find_proxy_sessions(self, name: str, endpoint: str | None = None) -> list[CassetteRow]:
        """Index rows of the proxy sessions called ``name`` (for one upstream endpoint), oldest first."""
        sql, args = "SELECT * FROM cassettes WHERE kind = ? AND task_id = ?", ["proxy", name]
        if endpoint is not None:
            sql, args = sql + " AND endpoint = ?", [*args, endpoint]
        cursor = self.db.conn.execute(sql + " ORDER BY created_at, id", args)
        cols = [c[0] for c in cursor.description]
        return as_rows(CassetteRow, cols, cursor.fetchall())

    def get_certificate(self, cert_id: str) -> CertificateRecord | None:
        """A certification row by id (``doc`` decoded), or None. Never creates the table."""
        if not self._has_table("certificates"):
            return None
        row = self._row(CertificateRow, "certificates", "id", cert_id)
        if row is None:
            return None
        return {**row, "doc": json.loads(row["doc"]) if row.get("doc") else {}}

    def put_certificate(self, row: CertificateRow) -> None:
        with self.write_lock():
            self._table("certificates").insert(dict(row), replace=True)
