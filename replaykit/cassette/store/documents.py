"""Documents (runs, trainings, verdicts, ...) in the ``runs`` table: written by id,
read with the blob verified and the row's id and kind checked against the document.

A document written again under its id (a training after each epoch) replaces its row, and
the blob of the version it replaced goes once that is committed, unless something else
still names it (another row's document, a live writer's lease): a training leaves no
superseded versions behind for ``gc``. A reader therefore reads a row and its blob as one
version: a blob missing under a row that has changed since is read again at the new
version (:meth:`DocumentsMixin.doc_version`); only under an unchanged row is it damage."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from replaykit.cassette.integrity import doc_mismatches
from replaykit.cassette.store.blobs import BlobsMixin
from replaykit.cassette.store.schema import RunsRow, typed_rows
from replaykit.core.determinism import canonical_json
from replaykit.core.errors import CassetteNotFound, StoreCorrupt, StoreError

#: times a read follows a document that keeps being replaced under it before giving up
REREADS = 8


if TYPE_CHECKING:
    from replaykit.cassette.codec import Blobs
    from replaykit.core.records import JSON
    from replaykit.core.run_doc import RunDoc
    from replaykit.core.training_doc import TrainingDoc


def run_model() -> type[RunDoc]:
    """``RunDoc``, imported when a run is read (a listing of cassettes loads no pydantic)."""
    from replaykit.core.run_doc import RunDoc

    return RunDoc


def training_model() -> type[TrainingDoc]:
    """``TrainingDoc``, imported when a training is read."""
    from replaykit.core.training_doc import TrainingDoc

    return TrainingDoc


class DocumentsMixin(BlobsMixin):
    """The ``runs`` table: one row (a few columns + a JSON document blob) per document."""

    def put_run(self, run: RunDoc) -> None:
        """Store a run document (:class:`~replaykit.core.run_doc.RunDoc`)."""
        self.put_doc(
            run.run_id,
            run.kind,
            run.to_json(),
            name=run.name,
            harness_sha=run.harness_sha,
            model=run.model.name,
            endpoint=run.model.endpoint,
            config_digest=run.config_digest,
        )

    def put_doc(self, doc_id: str, kind: str, doc: Mapping[str, object], **columns: str) -> None:
        """Store a document (run, training, verdict, ...) in the ``runs`` table by id."""
        from replaykit.cassette.codec import put  # the episode codec: loaded for a write

        blobs: Blobs = {}
        doc_hash = put(blobs, canonical_json(doc).encode("utf-8"))
        row = {"name": "", "harness_sha": "", "model": "", "endpoint": "", "config_digest": ""}
        row.update(columns)
        row.update({"id": doc_id, "kind": kind, "doc": doc_hash})
        with self.write_lock():
            before = self.driver.select("runs", ["doc"], {"id": doc_id}, limit=1)
            self._write_row("runs", row, blobs)
        replaced = str(before[0]["doc"]) if before and before[0]["doc"] else ""
        if replaced and replaced != doc_hash:
            # after the new version is committed: a reader holding the old row then finds the
            # row changed (a backend whose commit is not atomic across tables included)
            with self.write_lock():
                if not self._blob_named(replaced):
                    self.driver.delete("blobs", {"hash": replaced})

    def _blob_named(self, digest: str) -> bool:
        """Does anything still name this document blob: a row's document, or a lease (a live
        writer about to reference it)? Only rows name a document's blob (its canonical JSON,
        carrying its own id); ``gc`` collects it otherwise."""
        return any(
            self.driver.count(table, where)
            for table, where in (
                ("runs", {"doc": digest}),
                ("cassettes", {"doc": digest}),
                ("leases", {"tbl": "blobs", "key": digest}),
            )
        )

    def verified_doc(self, row: Mapping[str, object], data: bytes | None = None) -> dict[str, JSON]:
        """A runs-table row's document, its blob verified and its id checked against the row
        (a row as stored, or as a bundle carries it: what it holds is what is checked);
        ``data``: the blob's bytes, already read and verified with the row (``doc_version``)."""
        where = f"{row.get('kind') or 'document'} {row['id']}"
        try:
            doc = json.loads(self.get_blob(str(row["doc"])) if data is None else data)
        except StoreCorrupt as exc:
            raise exc.within(where, self.location) from None
        except ValueError:
            raise self.corrupt(f"document {str(row['doc'])[:12]}… is not JSON", where) from None
        if not isinstance(doc, dict):
            raise self.corrupt(f"document {str(row['doc'])[:12]}… is not a JSON object", where)
        bad = doc_mismatches(row, doc)
        if bad:
            raise self.corrupt(f"{where}: {'; '.join(bad)} (row and document disagree)")
        return doc

    def has_doc(self, doc_id: str, doc_digest: str) -> bool:
        """Is ``doc_id`` stored with exactly the document whose canonical JSON hashes to ``doc_digest``?"""
        rows = self.driver.select("runs", ["doc"], {"id": doc_id}, limit=1)
        return bool(rows) and rows[0]["doc"] == doc_digest

    def get_doc(self, doc_id: str, kind: str | None = None) -> Mapping[str, object]:
        """A document by id or unique prefix, verified against its row; of ``kind``, when
        given (another kind is "not found"), as a mapping (a run is ``get_run``, a training
        ``get_training``; a verdict or a compare result: ``train/derived.read_verdict``,
        ``episodes/compare.read_compare`` read it into its model)."""
        what = kind or "document"
        full = self.resolve_id("runs", doc_id, what=what)
        row, data = self.doc_version(full)
        doc = self.verified_doc(row, data)  # a row whose kind was damaged is corruption, not a wrong id
        if kind and row["kind"] != kind:
            raise CassetteNotFound(f"{doc_id!r} is a {row['kind']}, not a {kind}, in store {self.location}")
        return doc

    def doc_kind(self, doc_id: str) -> str:
        full = self.resolve_id("runs", doc_id, what="run or training")
        return str(self._runs_row(full)["kind"])

    def _runs_row(self, full: str) -> RunsRow:
        row = self._row(RunsRow, "runs", "id", full)
        if row is None:  # resolve_id found it: removed since
            raise CassetteNotFound(f"document {full} was removed from store {self.location} as it was read")
        return row

    def doc_version(self, doc_id: str) -> tuple[RunsRow, bytes]:
        """Document ``doc_id``'s row (full id) and its blob's bytes (verified against its address),
        as of one version. The two are read apart, and a writer replacing the document drops
        the old blob: a blob missing under a row that has changed since is read again at the
        row's new version; under an unchanged row it is read once more (rewritten meanwhile?),
        then it is store corruption."""
        row = self._runs_row(doc_id)
        for _ in range(REREADS):
            try:
                return row, self.get_blob(str(row["doc"]))
            except StoreCorrupt as exc:
                now = self._runs_row(doc_id)
                if now["doc"] == row["doc"]:
                    try:
                        return now, self.get_blob(str(now["doc"]))
                    except StoreCorrupt:
                        raise exc.within(f"{row['kind'] or 'document'} {doc_id}", self.location) from None
                row = now
        raise StoreError(
            f"document {doc_id} was replaced {REREADS} times while it was read from {self.location}; try again"
        )

    def get_run(self, run_id: str) -> RunDoc:
        """A measured run (kind ``measure``) by id or unique prefix, its document verified."""
        full = self.resolve_id("runs", run_id, what="run")
        row, data = self.doc_version(full)
        doc = self.verified_doc(row, data)  # a row whose kind was damaged is corruption, not a wrong id
        if row["kind"] != "measure":
            raise CassetteNotFound(f"{run_id!r} is a {row['kind']}, not a run, in store {self.location}")
        try:
            return run_model().read(doc)
        except ValueError as exc:
            raise self.corrupt(f"its document is not a run ({str(exc)[:80]})", f"run {full}") from None

    def get_training(self, training_id: str) -> TrainingDoc:
        """A training (kind ``training``) by id or unique prefix, its document verified against
        its row and read into its model (not recomputed: ``train/derived.verified_training``)."""
        return self.training_of(training_id, self.get_doc(training_id, kind="training"))

    def training_of(self, training_id: str, doc: object) -> TrainingDoc:
        """A training's document (as decoded) read into its model; one of another shape is corruption."""
        try:
            return training_model().read(doc)
        except ValueError as exc:
            said = " ".join(str(exc).split())[:100]  # pydantic's lines, as one
            raise self.corrupt(
                f"its document is not a training ({said})", f"training {training_id}"
            ) from None

    def list_runs(self) -> list[RunsRow]:
        return typed_rows(RunsRow, self.driver.select("runs", order=[("created_at", False), ("id", False)]))
