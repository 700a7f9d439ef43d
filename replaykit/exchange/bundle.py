"""Bundles: a portable, verified archive of any run, training or cassette of a store.

A bundle is a tar file (gzip-compressed when its name ends in ``.gz``/``.tgz``)::

    manifest.json           format name + version, tool versions, the root, and
                            {"sha256", "size"} of every other member
    index/cassettes.json    the index rows (all columns), sorted by id
    index/runs.json
    index/trees.json
    blobs/<sha256>          every blob the rows reference, named by its own hash

Export walks a document generically: a row of the ``runs`` table (any ``kind``)
pulls in the ids it lists under ``runs`` and ``verdicts`` (same table), its
``cassettes`` (with every blob their episode documents reference), the trees
of ``harness_sha`` and of each SHA under ``trees`` (with their file blobs) and
the blob hashes it lists under ``blobs`` (e.g. a training's git bundle); a
cassette also pulls in its harness tree when the store has it. Members are
sorted and their metadata fixed, so the same content gives the same bytes.

Import verifies everything before writing anything (:func:`read_bundle` in
:mod:`~replaykit.exchange.reader`, its checks in :mod:`~replaykit.exchange.verifier`),
refuses an id that already exists in the target with other content, and writes all
rows and blobs in one transaction.
Importing the same bundle twice is a no-op.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any, Callable, cast

from replaykit.cassette.backend import StoreBackend
from replaykit.core.determinism import normal_tarinfo, sha256_hex
from replaykit.core.errors import CassetteNotFound, StoreCorrupt, StoreError
from replaykit.core.files import write_atomic
from replaykit.core.records import RunDocument
from replaykit.exchange import images
from replaykit.exchange.bundle_format import (
    CONTENT,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST,
    TABLES,
    BundleError,
    BundleManifest,
    BundleReport,
    Cell,
    Selection,
)
from replaykit.exchange.reader import read_bundle
from replaykit.exchange.refs import doc_refs, episode_blobs, tree_blobs

#: recomputes one imported document by (id, kind); raises ``StoreError`` when it does not hold
DerivedCheck = Callable[[StoreBackend, str, str], None]

__all__ = [
    "collect",
    "export_bundle",
    "import_bundle",
    "verify_bundle",
]


# -- collecting from a store ----------------------------------------------------
def _open_existing(store: StoreBackend) -> StoreBackend:
    if not store.exists():
        raise CassetteNotFound(f"no store at {store.location}; pass --store")
    return store


def resolve_root(store: StoreBackend, root_id: str) -> tuple[str, str]:
    """``(table, full id)`` of a run/training/verdict id or, failing that, a cassette id."""
    _open_existing(store)
    try:
        return "runs", store.resolve_id("runs", root_id, what="run")
    except CassetteNotFound:
        pass
    try:
        return "cassettes", store.resolve_id("cassettes", root_id, what="cassette")
    except CassetteNotFound:
        raise CassetteNotFound(
            f"no run, training or cassette {root_id!r} in store {store.location}; check the id or pass --store"
        ) from None


def _row(store: StoreBackend, table: str, key: str, referrer: str) -> dict[str, Cell]:
    row = store.get_row(table, key)
    if row is not None:
        return row
    what = {"runs": "run", "cassettes": "cassette", "trees": "harness tree"}[table]
    raise BundleError(
        f"{referrer} references {what} {key} which is not in store {store.location}; cannot export a partial bundle"
    )


def collect(store: StoreBackend, root_id: str) -> Selection:
    """The closed subset of ``store`` reachable from a run/training/verdict or cassette id.

    Everything is verified on the way (blobs, documents against rows, cached columns
    against events): a damaged store raises ``StoreCorrupt`` and nothing is exported."""
    table, full = resolve_root(store, root_id)
    kind = "cassette" if table == "cassettes" else str(_row(store, "runs", full, "root")["kind"] or "measure")
    sel = Selection(root={"table": table, "id": full, "kind": kind})
    pending: list[tuple[str, str, str]] = [(table, full, "root")]
    while pending:
        table, key, referrer = pending.pop()
        if key in sel.rows[table]:
            continue
        row = _row(store, table, key, referrer)
        sel.rows[table][key] = row
        where = f"{table[:-1]} {key}"
        if table == "trees":
            for digest in tree_blobs(row["manifest"], where):
                try:
                    sel.blobs[digest] = store.get_blob(digest)
                except StoreCorrupt as exc:
                    raise exc.within(where, str(store.location)) from None
            continue
        if table == "cassettes":
            store.get_episode(key)  # verifies the blobs, the key and the cached columns
        else:
            verified = store.verified_doc(row)
            if row.get("kind") == "measure":
                store.check_run(cast(RunDocument, verified))  # checking it is the point: bad shapes raise
        doc_id, sha = str(row["doc"]), str(row.get("harness_sha") or "")
        sel.blobs[doc_id] = store.get_blob(doc_id)
        doc = json.loads(sel.blobs[doc_id])
        if table == "cassettes":
            refs, _ = episode_blobs(doc, store.get_blob, where)
            sel.blobs.update((d, store.get_blob(d)) for d in refs if d not in sel.blobs)
            if sha and store.has_tree(sha):  # what replays it, when stored
                pending.append(("trees", sha, where))
            continue
        listed = doc_refs(doc, where)
        sel.blobs.update((d, store.get_blob(d)) for d in listed.pop("blobs") if d not in sel.blobs)
        for ref_table, ids in listed.items():
            pending.extend((ref_table, i, where) for i in ids)
    return sel


# -- writing ----------------------------------------------------------------------
def _members(sel: Selection) -> list[tuple[str, bytes]]:
    members = [
        (
            f"index/{t}.json",
            (
                json.dumps(
                    [sel.rows[t][k] for k in sorted(sel.rows[t])],
                    indent=1,
                    sort_keys=True,
                    ensure_ascii=False,
                )
                + "\n"
            ).encode("utf-8"),
        )
        for t in TABLES
    ]
    members += [(f"blobs/{h}", sel.blobs[h]) for h in sorted(sel.blobs)]
    return members


def bundle_bytes(sel: Selection, compress: bool = True) -> bytes:
    """The archive bytes: deterministic for the same content and tool versions."""
    from replaykit.core.versions import tool_versions

    members = _members(sel)
    manifest: BundleManifest = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "tools": tool_versions(),
        "root": sel.root,
        "counts": sel.counts(),
        "members": {name: {"sha256": sha256_hex(data), "size": len(data)} for name, data in members},
    }
    members.insert(0, (MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(normal_tarinfo(info), io.BytesIO(data))
    raw = buf.getvalue()
    return gzip.compress(raw, compresslevel=6, mtime=0) if compress else raw


def is_gzip_name(path: Path | str) -> bool:
    return str(path).endswith((".gz", ".tgz"))


def export_bundle(
    store: StoreBackend,
    root_id: str,
    out: Path | str,
    compress: bool | None = None,
    with_images: bool = False,
) -> BundleReport:
    """Write the bundle of ``root_id`` to ``out`` (atomically); return a summary. ``with_images``:
    the Docker images its cassettes ran in, ``docker save``d into it (``exchange/images.py``)."""
    out = Path(out)
    sel = collect(store, root_id)
    saved = images.add_images(sel) if with_images else []
    data = bundle_bytes(sel, is_gzip_name(out) if compress is None else compress)
    write_atomic(out, data)  # 0644 like the user's other files (mkstemp's 0600 before)
    return {
        "path": str(out),
        "root": sel.root,
        "counts": sel.counts(),
        "bytes": len(data),
        "sha256": sha256_hex(data),
        "images": saved,
    }


def verify_bundle(path: Path | str, store: StoreBackend | None = None) -> BundleReport:
    """Check a bundle without importing it; with ``store``, also what an import would do."""
    sel = read_bundle(path)
    report: BundleReport = {
        "path": str(path),
        "ok": True,
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "root": sel.root,
        "counts": sel.counts(),
        "tools": sel.manifest["tools"] if sel.manifest else {},
    }
    if store is not None:
        plan = _plan(store, sel, Path(path)) if _has_index(store) else _full_plan(sel)
        report["would_import"] = {k: len(v) for k, v in plan.items()}
    return report


# -- importing ----------------------------------------------------------------------
def _has_index(store: StoreBackend) -> bool:
    return store.exists()


def _full_plan(sel: Selection) -> dict[str, list[Any]]:
    plan: dict[str, list[Any]] = {t: [sel.rows[t][k] for k in sorted(sel.rows[t])] for t in TABLES}
    plan["blobs"] = sorted(sel.blobs)
    return plan


def _same(table: str, ours: Any, theirs: Any) -> bool:
    if table == "trees":
        try:
            return bool(json.loads(ours) == json.loads(theirs))
        except (TypeError, ValueError):
            return False
    return bool(ours == theirs)


def _plan(store: StoreBackend, sel: Selection, path: Path) -> dict[str, list[Any]]:
    """What importing ``sel`` would write; an id present with other content is refused."""
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
                raise BundleError(
                    f"{what} {key} already exists in store {store.location} with other content; refusing to import {path} "
                    "(import into another store, or remove that id first)"
                )
    have = store.present("blobs", sorted(sel.blobs))
    plan["blobs"] = [h for h in sorted(sel.blobs) if h not in have]
    return plan


def import_bundle(store: StoreBackend, path: Path | str, derived: DerivedCheck | None = None) -> BundleReport:
    """Verify a bundle completely, then write all its rows and blobs in one transaction.

    Nothing is written (not even an empty index) unless the whole bundle
    verifies and none of its ids exists in ``store`` with other content. Rows and
    blobs already present are left alone: importing the same bundle twice is a no-op.
    ``derived(store, id, kind)`` recomputes each imported document (verdicts and
    trainings: ``replaykit.train.derived.verify_document``) inside the transaction,
    before it commits; a ``store corrupt`` there refuses the import.
    """
    path = Path(path)
    sel = read_bundle(path)
    plan = _plan(store, sel, path) if _has_index(store) else _full_plan(sel)
    report: BundleReport = {
        "path": str(path),
        "store": str(store.location),
        "root": sel.root,
        "counts": sel.counts(),
    }
    if any(plan.values()):
        with store.transaction():
            plan = _plan(store, sel, path)  # again inside the transaction: no writer slipped in between
            store.insert_blobs({h: sel.blobs[h] for h in plan["blobs"]})
            for table in TABLES:
                store.insert_rows(table, plan[table])
            for row in plan["runs"] if derived is not None else []:
                try:
                    derived(store, str(row["id"]), str(row.get("kind") or "measure"))  # type: ignore[misc]
                except StoreError as exc:
                    detail = str(exc).split(" in store ")[0]
                    raise BundleError(f"bundle {path}: {detail}; refusing (nothing was imported)") from None
    report["imported"] = {k: len(v) for k, v in plan.items()}
    report["images_loaded"] = images.load_images(store, sel)  # the engine may lack them even on a no-op
    report["noop"] = not any(plan.values()) and not report["images_loaded"]
    return report
