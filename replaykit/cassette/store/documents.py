"""Documents (runs, trainings, verdicts, ...) in the ``runs`` table: written by id,
read with the blob verified and the row's id and kind checked against the document."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, cast, overload

from replaykit.cassette.codec import Blobs, put
from replaykit.cassette.integrity import doc_mismatches
from replaykit.cassette.store.blobs import BlobsMixin
from replaykit.cassette.store.schema import RunsRow, typed_rows
from replaykit.core.determinism import canonical_json
from replaykit.core.errors import CassetteNotFound, StoreCorrupt
from replaykit.core.records import (
    JSON,
    CompareDocument,
    RunDoc,
    RunDocument,
    TrainingDocument,
    VerdictDocument,
)


class DocumentsMixin(BlobsMixin):
    """The ``runs`` table: one row (a few columns + a JSON document blob) per document."""

    def put_run(self, run: RunDoc | RunDocument) -> None:
        """Store a run document (a :class:`~replaykit.core.records.RunDoc` or its ``to_dict()`` form)."""
        if isinstance(run, RunDoc):
            run = run.to_dict()
        self.put_doc(
            run["run_id"],
            run.get("kind", "measure"),
            run,
            name=run.get("name", ""),
            harness_sha=run["harness_sha"],
            model=run["model"]["name"],
            endpoint=run["model"]["endpoint"],
            config_digest=run["config_digest"],
        )

    def put_doc(self, doc_id: str, kind: str, doc: Mapping[str, object], **columns: str) -> None:
        """Store a document (run, training, verdict, ...) in the ``runs`` table by id."""
        blobs: Blobs = {}
        doc_hash = put(blobs, canonical_json(doc).encode("utf-8"))
        row = {"name": "", "harness_sha": "", "model": "", "endpoint": "", "config_digest": ""}
        row.update(columns)
        row.update({"id": doc_id, "kind": kind, "doc": doc_hash})
        self._write_row("runs", row, blobs)

    def verified_doc(self, row: Mapping[str, object]) -> dict[str, JSON]:
        """A runs-table row's document, its blob verified and its id checked against the row
        (a row as stored, or as a bundle carries it: what it holds is what is checked)."""
        where = f"{row.get('kind') or 'document'} {row['id']}"
        try:
            doc = self.get_json(str(row["doc"]))
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

    @overload
    def get_doc(self, doc_id: str, kind: Literal["training"]) -> TrainingDocument: ...
    @overload
    def get_doc(self, doc_id: str, kind: Literal["verdict"]) -> VerdictDocument: ...
    @overload
    def get_doc(self, doc_id: str, kind: Literal["compare"]) -> CompareDocument: ...
    @overload
    def get_doc(self, doc_id: str, kind: str | None = None) -> Mapping[str, object]: ...
    def get_doc(self, doc_id: str, kind: str | None = None) -> Mapping[str, object]:
        """A document by id or unique prefix, verified against its row; of ``kind``, when
        given (another kind is "not found"): a training, verdict or compare result as the
        TypedDict its writer stores (``core/records.py``), any other kind as a mapping."""
        what = kind or "document"
        full = self.resolve_id("runs", doc_id, what=what)
        row = self._runs_row(full)
        if kind and row["kind"] != kind:
            self.verified_doc(row)  # a row whose kind was damaged is corruption, not a wrong id
            raise CassetteNotFound(f"{doc_id!r} is a {row['kind']}, not a {kind}, in store {self.location}")
        return self.verified_doc(row)

    def doc_kind(self, doc_id: str) -> str:
        full = self.resolve_id("runs", doc_id, what="run or training")
        return str(self._runs_row(full)["kind"])

    def _runs_row(self, full: str) -> RunsRow:
        row = self._row(RunsRow, "runs", "id", full)
        assert row is not None  # resolve_id found it
        return row

    def get_run(self, run_id: str) -> RunDoc:
        """A measured run (kind ``measure``) by id or unique prefix, its document verified."""
        full = self.resolve_id("runs", run_id, what="run")
        row = self._runs_row(full)
        if row["kind"] != "measure":
            self.verified_doc(row)  # a row whose kind was damaged is corruption, not a wrong id
            raise CassetteNotFound(f"{run_id!r} is a {row['kind']}, not a run, in store {self.location}")
        doc = self.verified_doc(row)
        try:
            return RunDoc.from_dict(cast(RunDocument, doc))  # a bad shape raises below
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self.corrupt(
                f"its document is not a run ({type(exc).__name__}: {str(exc)[:80]})", f"run {full}"
            ) from None

    def list_runs(self) -> list[RunsRow]:
        return typed_rows(RunsRow, self.driver.select("runs", order=[("created_at", False), ("id", False)]))
