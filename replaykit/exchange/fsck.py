"""``replaykit cassettes verify --store S``: check a whole store (an fsck) and say what is damaged.

Every blob against its content address, every cassette (its blobs, its key against
its row, its cached columns against its events), every run/training/verdict document
against its row (and a run's episode entries against their cassettes), every claim of a
cassette that it was served a donor's events (``cassette/lineage.py``: against its events
and the donor's; a donor not in the store leaves it unchecked, listed), every harness
tree's files, and the reference graph: every run, verdict, cassette, tree and blob a kept
document names exists (and, being checked itself, verifies). Reads only: the store is opened read-only and stays byte-identical.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, NotRequired, TypedDict

from replaykit.cassette.backend import MaintenanceStore, StoreBackend
from replaykit.cassette.lineage import check_claim
from replaykit.core.errors import StoreError
from replaykit.core.progress import Progress
from replaykit.exchange.bundle_format import BundleError
from replaykit.exchange.importer import DerivedCheck
from replaykit.exchange.refs import doc_refs, stored_run


class DamagedItem(TypedDict):
    table: str  # blobs | cassettes | runs | trees
    id: str
    error: str


class StoreCheck(TypedDict):
    """``cassettes verify`` without a bundle: what was checked, each damaged item."""

    store: str
    ok: bool
    checked: dict[str, int]  # table → items checked (``claims``: reuse claims checked against their donors)
    damaged: list[DamagedItem]
    unchecked: NotRequired[list[str]]  # cassettes whose claimed donor is not in the store


def verify_store(
    store: StoreBackend, progress: Progress | None = None, derived: DerivedCheck | None = None
) -> StoreCheck:
    """A report: what was checked, and one line per damaged item (``ok`` when none).
    ``derived(store, id, kind)`` recomputes verdicts and trainings
    (``replaykit.train.derived.verify_document``; the command passes it)."""
    fsck = _Fsck(store, derived)
    hashes = [str(r[0]) for r in store.index_rows("blobs", "hash")]
    if progress:
        progress("plan", {"total": len(hashes)})
    for digest in hashes:
        fsck.check("blobs", digest, store.get_blob)
    for (cid,) in store.index_rows("cassettes", "id"):
        fsck.check("cassettes", str(cid), fsck.cassette)
    for rid, kind in store.index_rows("runs", "id, kind"):
        fsck.check("runs", str(rid), lambda r, k=str(kind): fsck.document(r, k))  # type: ignore[misc]
    for (sha,) in store.index_rows("trees", "sha"):
        fsck.check("trees", str(sha), store.get_tree)
    damaged = fsck.damaged
    result: StoreCheck = {
        "store": store.location,
        "ok": not damaged,
        "checked": fsck.checked,
        "damaged": damaged,
    }
    if fsck.unchecked:
        result["unchecked"] = fsck.unchecked
    return result


class _Fsck:
    """What one check of a store has counted and found damaged so far."""

    def __init__(self, store: StoreBackend, derived: DerivedCheck | None) -> None:
        self.store = store
        self.derived = derived
        self.damaged: list[DamagedItem] = []
        self.checked = {"blobs": 0, "cassettes": 0, "claims": 0, "runs": 0, "trees": 0}
        self.unchecked: list[str] = []  # cassettes whose claimed donor is not in the store

    def check(self, table: str, key: str, fn: Callable[[str], Any]) -> None:
        """``fn(key)`` counted under ``table``; a store error it raises is one damaged item."""
        self.checked[table] += 1
        try:
            fn(key)
        except StoreError as exc:  # StoreCorrupt, a missing row, an unreadable document
            self.damaged.append({"table": table, "id": key, "error": str(exc).split(" in store ")[0]})

    def cassette(self, cid: str) -> None:
        """A cassette read (and so verified) and its reuse claim checked against its donor."""
        status = check_claim(self.store, self.store.get_episode(cid))
        if status == "checked":
            self.checked["claims"] += 1
        elif status == "donor absent":
            self.unchecked.append(cid)

    def document(self, doc_id: str, kind: str) -> None:
        """A document, its run entries against their cassettes, what it names, and (derived
        kinds) its content recomputed."""
        doc = self.store.get_doc(doc_id)
        if kind == "measure":
            self.store.check_run(stored_run(self.store, doc, f"run {doc_id}"))  # checking it is the point
        check_references(self.store, f"{kind} {doc_id}", doc)
        if self.derived is not None:
            self.derived(self.store, doc_id, kind)


def check_references(store: MaintenanceStore, where: str, doc: Mapping[str, object]) -> None:
    """Every row and blob ``doc`` names is in the store (``store corrupt`` naming the first missing)."""
    try:
        refs = doc_refs(doc, where)
    except BundleError as exc:
        raise store.corrupt(str(exc)) from None
    for table, ids in refs.items():
        found = store.present(table, list(dict.fromkeys(ids)))
        missing = next((i for i in ids if i not in found), None)
        if missing is not None:
            what = {"runs": "document", "cassettes": "cassette", "trees": "harness tree", "blobs": "blob"}[
                table
            ]
            raise store.corrupt(f"{where} references {what} {missing[:16]}, which is not in the store")
