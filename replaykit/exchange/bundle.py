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

Importing and verifying one is :mod:`~replaykit.exchange.importer`.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import cast

from replaykit.cassette.backend import StoreBackend
from replaykit.core.determinism import canonical_json, normal_tarinfo, sha256_hex
from replaykit.core.errors import CassetteNotFound, StoreCorrupt
from replaykit.core.files import write_atomic
from replaykit.core.records import RunDocument
from replaykit.exchange import images
from replaykit.exchange.bundle_format import (
    CERTIFICATES,
    FORMAT_NAME,
    MANIFEST,
    TABLES,
    BundleError,
    BundleManifest,
    BundleReport,
    Cell,
    Selection,
)
from replaykit.exchange.refs import doc_certificates, doc_refs, episode_blobs, tree_blobs

__all__ = [
    "collect",
    "export_bundle",
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
            data = store.get_blob(str(row["doc"]))
        else:
            version, data = store.doc_version(key)  # row and blob of one version (a live training saves)
            row = sel.rows[table][key] = cast(dict[str, Cell], dict(version))
            verified = store.verified_doc(row, data)
            if row.get("kind") == "measure":
                store.check_run(cast(RunDocument, verified))  # checking it is the point: bad shapes raise
        doc_id, sha = str(row["doc"]), str(row.get("harness_sha") or "")
        sel.blobs[doc_id] = data
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
        for cert_id in doc_certificates(doc, where):
            sel.certificates[cert_id] = _certificate(store, cert_id, where)
    return sel


def _certificate(store: StoreBackend, cert_id: str, referrer: str) -> dict[str, Cell]:
    """A certificate a document names, as a bundle row (``doc`` as canonical JSON)."""
    record = store.get_certificate(cert_id)
    if record is None:
        raise BundleError(
            f"{referrer} names certificate {cert_id} which is not in store {store.location}; cannot export a partial bundle"
        )
    row: dict[str, Cell] = {k: v for k, v in record.items() if k != "doc" and isinstance(v, (str, int))}
    row["doc"] = canonical_json(record.get("doc") or {})
    return row


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
    if sel.certificates:  # format 2 (a bundle without certificates stays version 1)
        rows = [sel.certificates[k] for k in sorted(sel.certificates)]
        text = json.dumps(rows, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        members.append((CERTIFICATES, text.encode("utf-8")))
    members += [(f"blobs/{h}", sel.blobs[h]) for h in sorted(sel.blobs)]
    return members


def bundle_bytes(sel: Selection, compress: bool = True) -> bytes:
    """The archive bytes: deterministic for the same content and tool versions."""
    from replaykit.core.versions import tool_versions

    members = _members(sel)
    manifest: BundleManifest = {
        "format": FORMAT_NAME,
        "version": sel.version(),
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
