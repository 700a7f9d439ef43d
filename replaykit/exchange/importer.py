"""Importing a bundle, and verifying one: the same path, into the target or a scratch store.

Import verifies everything before writing anything (:func:`read_bundle` in
:mod:`~replaykit.exchange.reader`, its checks in :mod:`~replaykit.exchange.verifier`),
refuses an id that already exists in the target with other content, writes all rows,
blobs and certificates in one transaction and, inside it, recomputes every derived
document it adds (``derived``: verdicts and trainings, ``train.derived.verify_document``);
a ``store corrupt`` there rolls the transaction back. Importing the same bundle twice is a
no-op. :func:`verify_bundle` takes exactly that path into a scratch store of its own (a
temporary folder, removed after), so ``cassettes verify BUNDLE`` refuses whatever
``cassettes import`` refuses, with the same line; the target store, when given, is only
read (what an import would add, or which id it would refuse).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from replaykit.cassette.backend import DocumentStore, StoreBackend, StoreHandle

if TYPE_CHECKING:
    from replaykit.cassette.certificates import Certificate
from replaykit.cassette.stores import open_store
from replaykit.core.errors import StoreError
from replaykit.core.stale import owned_temp_dir
from replaykit.exchange import images
from replaykit.exchange.bundle_format import (
    CONTENT,
    FORMAT_NAME,
    TABLES,
    BundleError,
    BundleReport,
    Cell,
    Selection,
)
from replaykit.exchange.reader import read_bundle

#: recomputes one imported document by (id, kind); raises ``StoreError`` when it does not hold
DerivedCheck = Callable[[StoreBackend, str, str], None]

__all__ = ["DerivedCheck", "import_bundle", "import_selection", "verify_bundle"]


def _full_plan(sel: Selection) -> dict[str, list[Any]]:
    plan: dict[str, list[Any]] = {t: [sel.rows[t][k] for k in sorted(sel.rows[t])] for t in TABLES}
    plan["blobs"] = sorted(sel.blobs)
    plan["certificates"] = [sel.certificates[k] for k in sorted(sel.certificates)]
    return plan


def _same(table: str, ours: Any, theirs: Any) -> bool:
    if table == "trees":
        try:
            return bool(json.loads(ours) == json.loads(theirs))
        except (TypeError, ValueError):
            return False
    return bool(ours == theirs)


def _refused(what: str, key: str, store: StoreHandle, path: Path | str) -> BundleError:
    return BundleError(
        f"{what} {key} already exists in store {store.location} with other content; refusing to import {path} "
        "(import into another store, or remove that id first)"
    )


def certificate_of(row: Mapping[str, object]) -> Certificate:
    """A bundle's certificate row (``doc`` as canonical JSON) as the store's certificate."""
    from replaykit.cassette.certificates import Certificate  # pydantic: loaded for a certificate

    return Certificate.from_row(row)


def _certificates_plan(store: DocumentStore, sel: Selection, path: Path | str) -> list[dict[str, Cell]]:
    """The bundle's certificates the store lacks; one it holds with another verdict is refused."""
    out = []
    for key in sorted(sel.certificates):
        row = sel.certificates[key]
        have = store.get_certificate(key)
        if have is None:
            out.append(row)
        elif (have.status, have.reason, have.doc) != (
            row["status"],
            row["reason"],
            json.loads(str(row["doc"])),
        ):
            raise _refused("certificate", key, store, path)
    return out


def _plan(store: StoreBackend, sel: Selection, path: Path | str) -> dict[str, list[Any]]:
    """What importing ``sel`` would write; an id present with other content is refused."""
    if not store.exists():
        return _full_plan(sel)
    plan: dict[str, list[Any]] = {}
    for table in TABLES:
        existing = store.present(table, sorted(sel.rows[table]), CONTENT[table])
        plan[table] = []
        for key in sorted(sel.rows[table]):
            row = sel.rows[table][key]
            if key not in existing:
                plan[table].append(row)
            elif not _same(table, row[CONTENT[table]], existing[key]):
                what = {"runs": "run", "cassettes": "cassette", "trees": "harness tree"}[table]
                raise _refused(what, key, store, path)
    have = store.present("blobs", sorted(sel.blobs))
    plan["blobs"] = [h for h in sorted(sel.blobs) if h not in have]
    plan["certificates"] = _certificates_plan(store, sel, path)
    return plan


#: blobs are read from the spool and inserted this many bytes at a time (memory stays bounded)
BATCH_BYTES = 8 << 20


def _batches(sel: Selection, digests: list[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    size = 0
    for digest in digests:
        if batch and size + sel.blobs.size(digest) > BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(digest)
        size += sel.blobs.size(digest)
    if batch:
        yield batch


def _write(
    store: StoreBackend, sel: Selection, path: Path | str, derived: DerivedCheck | None
) -> dict[str, list[Any]]:
    """Write what ``store`` lacks of ``sel`` in one transaction, recomputing each derived
    document it adds before the transaction commits (a failure rolls everything back)."""
    with store.transaction():
        plan = _plan(store, sel, path)  # inside the transaction: no writer slipped in between
        for batch in _batches(sel, plan["blobs"]):
            store.insert_blobs({h: sel.blobs[h] for h in batch})
        for table in TABLES:
            store.insert_rows(table, plan[table])
        for row in plan["certificates"]:
            from replaykit.cassette.certificates import Certificate  # pydantic: for a certificate

            store.put_certificate(
                Certificate.from_row(row)
            )  # checked as a certificate row (verifier.load_certificates)
        for row in plan["runs"] if derived is not None else []:
            try:
                derived(store, str(row["id"]), str(row.get("kind") or "measure"))  # type: ignore[misc]
            except StoreError as exc:
                detail = str(exc).split(" in store ")[0]
                raise BundleError(f"bundle {path}: {detail}; refusing (nothing was imported)") from None
    return plan


def import_bundle(store: StoreBackend, path: Path | str, derived: DerivedCheck | None = None) -> BundleReport:
    """Verify a bundle completely, then write all its rows and blobs in one transaction.

    Nothing is written (not even an empty index) unless the whole bundle
    verifies and none of its ids exists in ``store`` with other content. Rows and
    blobs already present are left alone: importing the same bundle twice is a no-op.
    ``derived(store, id, kind)`` recomputes each imported document (verdicts, trainings and
    compare results: ``replaykit.train.derived.verify_document``) inside the transaction,
    before it commits; a ``store corrupt`` there refuses the import.
    """
    sel = read_bundle(Path(path))
    return import_selection(store, sel, str(path), derived)


def import_selection(
    store: StoreBackend, sel: Selection, source: str, derived: DerivedCheck | None = None
) -> BundleReport:
    """Write a verified selection (a bundle's, or a pulled OCI artefact's: ``source`` names it)
    as :func:`import_bundle` does; its spool is removed after. A store that does not exist yet
    is created only once the derived documents have been recomputed in a scratch store (a
    refusal leaves no empty store behind)."""
    path = source
    try:
        plan = _plan(store, sel, path)
        report: BundleReport = {
            "path": source,
            "store": str(store.location),
            "root": sel.root,
            "counts": sel.counts(),
        }
        if any(plan.values()):
            if not store.exists() and derived is not None and _has_derived(sel):
                _in_scratch(sel, path, derived)  # refused here: the target was never created
                derived = None
            plan = _write(store, sel, path, derived)
    finally:
        sel.blobs.close()  # the spool: everything is in the store now
    report["imported"] = {k: len(v) for k, v in plan.items() if k != "certificates" or v}
    report["images_loaded"] = images.load_images(store, sel)  # the engine may lack them even on a no-op
    report["noop"] = not any(plan.values()) and not report["images_loaded"]
    return report


def _has_derived(sel: Selection) -> bool:
    """Does the selection hold documents other than runs (what ``derived`` recomputes)?"""
    return any((r.get("kind") or "measure") != "measure" for r in sel.rows["runs"].values())


def _in_scratch(sel: Selection, path: Path | str, derived: DerivedCheck) -> None:
    """Write ``sel`` into a scratch store of its own, recomputing its derived documents there."""
    scratch_dir = owned_temp_dir("verify")
    scratch = open_store(str(scratch_dir / "store"))
    try:
        _write(scratch, sel, path, derived)
    finally:
        scratch.close()
        shutil.rmtree(scratch_dir, ignore_errors=True)


def verify_bundle(
    path: Path | str, store: StoreBackend | None = None, derived: DerivedCheck | None = None
) -> BundleReport:
    """Check a bundle without importing it: everything an import checks, its derived documents
    recomputed in a scratch store (``derived``; only when the bundle holds documents other than
    runs); with ``store``, also what an import into it would do (that store is only read)."""
    path = Path(path)
    sel = read_bundle(path)
    try:
        return _verified(path, sel, store, derived)
    finally:
        sel.blobs.close()


def _verified(
    path: Path, sel: Selection, store: StoreBackend | None, derived: DerivedCheck | None
) -> BundleReport:
    if derived is not None and _has_derived(sel):
        _in_scratch(sel, path, derived)
    report: BundleReport = {
        "path": str(path),
        "ok": True,
        "format": FORMAT_NAME,
        "version": sel.manifest["version"] if sel.manifest else sel.version(),
        "root": sel.root,
        "counts": sel.counts(),
        "tools": sel.manifest["tools"] if sel.manifest else {},
    }
    if store is not None:
        plan = _plan(store, sel, path)
        report["would_import"] = {k: len(v) for k, v in plan.items() if k != "certificates" or v}
    return report
