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
from typing import Any, Callable, NotRequired, TypedDict, cast

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.lineage import check_claim
from replaykit.core.errors import StoreError
from replaykit.core.progress import Progress
from replaykit.core.records import RunDocument
from replaykit.exchange.bundle_format import BundleError
from replaykit.exchange.importer import DerivedCheck
from replaykit.exchange.refs import doc_refs


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
    damaged: list[DamagedItem] = []
    checked = {"blobs": 0, "cassettes": 0, "claims": 0, "runs": 0, "trees": 0}
    unchecked: list[str] = []

    def check(table: str, key: str, fn: Callable[[], Any]) -> None:
        checked[table] += 1
        try:
            fn()
        except StoreError as exc:  # StoreCorrupt, a missing row, an unreadable document
            damaged.append({"table": table, "id": key, "error": str(exc).split(" in store ")[0]})

    hashes = [str(r[0]) for r in store.index_rows("blobs", "hash")]
    if progress:
        progress("plan", {"total": len(hashes)})
    for digest in hashes:
        check("blobs", digest, lambda d=digest: store.get_blob(d))  # type: ignore[misc]

    def cassette(cid: str) -> None:
        status = check_claim(store, store.get_episode(cid))
        if status == "checked":
            checked["claims"] += 1
        elif status == "donor absent":
            unchecked.append(cid)

    for (cid,) in store.index_rows("cassettes", "id"):
        check("cassettes", str(cid), lambda c=str(cid): cassette(c))  # type: ignore[misc]
    for rid, kind in store.index_rows("runs", "id, kind"):

        def run_doc(r: str = str(rid), k: str = str(kind)) -> None:
            doc = store.get_doc(r)
            if k == "measure":
                store.check_run(cast(RunDocument, doc))  # checking it is the point: bad shapes raise
            check_references(store, f"{k} {r}", doc)
            if derived is not None:
                derived(store, r, k)

        check("runs", str(rid), run_doc)
    for (sha,) in store.index_rows("trees", "sha"):
        check("trees", str(sha), lambda s=str(sha): store.get_tree(s))  # type: ignore[misc]
    result: StoreCheck = {"store": store.location, "ok": not damaged, "checked": checked, "damaged": damaged}
    if unchecked:
        result["unchecked"] = unchecked
    return result


def check_references(store: StoreBackend, where: str, doc: Mapping[str, object]) -> None:
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
