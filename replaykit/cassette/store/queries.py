"""Named queries other layers ask (trainings by spec, proxy sessions by name,
certificates): the SQL they need stays here, behind a method name."""

from __future__ import annotations

import json
from typing import cast

from replaykit.cassette.store.blobs import BlobsMixin
from replaykit.cassette.store.driver import Row, Where
from replaykit.cassette.store.schema import CassetteRow, CertificateRecord, CertificateRow, typed_rows
from replaykit.core.records import TrainingDocument


class QueriesMixin(BlobsMixin):
    """Look-ups by something other than a primary key."""

    def find_trainings(self, spec_digest: str) -> list[TrainingDocument]:
        """Training documents recorded with this spec (a resumed training is one of them),
        oldest first: the ``runs`` rows of kind ``training`` whose ``config_digest`` is it."""
        rows = self.driver.select(
            "runs",
            ["doc"],
            {"kind": "training", "config_digest": spec_digest},
            [("created_at", False), ("id", False)],
        )
        blobs = self.get_blobs(str(r["doc"]) for r in rows)
        trainings: list[TrainingDocument] = [json.loads(blobs[str(r["doc"])]) for r in rows]  # as stored
        return trainings

    def find_proxy_sessions(self, name: str, endpoint: str | None = None) -> list[CassetteRow]:
        """Index rows of the proxy sessions called ``name`` (for one upstream endpoint), oldest first."""
        where: Where = {"kind": "proxy", "task_id": name}
        if endpoint is not None:
            where = {**where, "endpoint": endpoint}
        rows = self.driver.select("cassettes", where=where, order=[("created_at", False), ("id", False)])
        return typed_rows(CassetteRow, rows)

    def get_certificate(self, cert_id: str) -> CertificateRecord | None:
        """A certification row by id (``doc`` decoded), or None. Never creates the table."""
        row = self._row(CertificateRow, "certificates", "id", cert_id)
        if row is None:
            return None
        return {**row, "doc": json.loads(row["doc"]) if row.get("doc") else {}}

    def put_certificate(self, row: CertificateRow) -> None:
        with self.write_lock():
            self.driver.insert("certificates", [cast(Row, row)], conflict="replace")
