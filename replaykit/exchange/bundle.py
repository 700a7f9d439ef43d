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

import hashlib
import io
import json
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

from replaykit.cassette.backend import (
    BlobStore,
    BrowseStore,
    DocumentStore,
    MaintenanceStore,
    RunStore,
    StoreBackend,
)
from replaykit.core.determinism import normal_tarinfo, sha256_hex
from replaykit.core.errors import CassetteNotFound, StoreCorrupt
from replaykit.core.files import atomic_writer
from replaykit.exchange import images
from replaykit.exchange.bundle_format import (
    CERTIFICATES,
    COMPARISON_KINDS,
    FORMAT_NAME,
    MANIFEST,
    TABLES,
    BundleError,
    BundleManifest,
    BundleReport,
    Cell,
    MemberDigest,
    Selection,
)
from replaykit.exchange.refs import doc_certificates, doc_refs, episode_blobs, stored_run, tree_blobs
from replaykit.exchange.spool import Blobs

__all__ = [
    "collect",
    "export_bundle",
]


# -- collecting from a store ----------------------------------------------------
def _open_existing(store: StoreBackend) -> StoreBackend:
    if not store.exists():
        raise CassetteNotFound(f"no store at {store.location}")
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
            f"no run, training or cassette {root_id!r} in store {store.location}; check the id"
        ) from None


def _row(store: MaintenanceStore, table: str, key: str, referrer: str) -> dict[str, Cell]:
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
    sel = Selection(root={"table": table, "id": full, "kind": kind}, blobs=Blobs(store))
    pending: list[tuple[str, str, str]] = [(table, full, "root")]
    if kind == "training":  # the comparisons made of it travel with it
        pending += [("runs", doc_id, f"training {full}") for doc_id in comparisons_of(store, full)]
    while pending:
        table, key, referrer = pending.pop()
        if key in sel.rows[table]:
            continue
        row = sel.rows[table][key] = _row(store, table, key, referrer)
        where = f"{table[:-1]} {key}"
        if table == "trees":
            _take_tree(store, sel, row, where)
        elif table == "cassettes":
            pending += _take_cassette(store, sel, key, row, where)
        else:
            pending += _take_document(store, sel, table, key, where)
    return sel


def comparisons_of(store: BrowseStore, training_id: str) -> list[str]:
    """The comparison documents of ``store`` that name training ``training_id`` or measured one of
    its harnesses (its initial baseline, a candidate): what a training's bundle carries besides it."""
    doc = store.get_doc(training_id, kind="training")  # walked by field name, as every document is
    epochs = doc.get("epochs")
    listed = [e for e in epochs if isinstance(e, dict)] if isinstance(epochs, list) else []
    shas = {doc.get("initial_sha"), *(e.get("candidate_sha") for e in listed)} - {None, ""}
    found = []
    for kind in COMPARISON_KINDS:
        for row in store.doc_rows(kind):
            other = store.get_doc(row["id"], kind=kind)
            if other.get("training_id") == training_id or shas & set(_listed(other.get("trees"))):
                found.append(row["id"])
    return sorted(found)


def _listed(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _take_tree(store: BlobStore, sel: Selection, row: dict[str, Cell], where: str) -> None:
    """A harness tree's blobs, named in the selection (verified now)."""
    for digest in tree_blobs(row["manifest"], where):
        try:
            _name(sel, store, digest)
        except StoreCorrupt as exc:
            raise exc.within(where, str(store.location)) from None


def _take_cassette(
    store: StoreBackend, sel: Selection, key: str, row: dict[str, Cell], where: str
) -> list[tuple[str, str, str]]:
    """A cassette's document and blobs, verified, named in the selection; what to take next: the
    documents its env kind names (its image's build, ...) and its harness tree (when stored:
    what replays it)."""
    episode = store.get_episode(key)  # verifies the blobs, the key and the cached columns
    data = store.get_blob(str(row["doc"]))
    after = [
        ("runs", doc_id, where)
        for doc_id in images.kind_documents(list(episode.key.extra))
        if store.get_row("runs", doc_id) is not None
    ]
    doc_id, sha = str(row["doc"]), str(row.get("harness_sha") or "")
    sel.blobs.name(doc_id, len(data))
    refs, _ = episode_blobs(json.loads(data), store.get_blob, where)
    for digest in refs:
        _name(sel, store, digest)
    return after + ([("trees", sha, where)] if sha and store.has_tree(sha) else [])


def _take_document(
    store: RunStore, sel: Selection, table: str, key: str, where: str
) -> list[tuple[str, str, str]]:
    """A document (run, training, verdict, ...) verified against its row, its blobs named and the
    certificates it names taken into the selection; the rows it names to take next."""
    version, data = store.doc_version(key)  # row and blob of one version (a live training saves)
    row = sel.rows[table][key] = cast(dict[str, Cell], dict(version))
    verified = store.verified_doc(row, data)
    if row.get("kind") == "measure":
        store.check_run(stored_run(store, verified, f"run {key}"))  # checking it is the point
    sel.blobs.name(str(row["doc"]), len(data))
    doc = json.loads(data)
    listed = doc_refs(doc, where)
    for digest in listed.pop("blobs"):
        _name(sel, store, digest)
    for cert_id in doc_certificates(doc, where):
        sel.certificates[cert_id] = _certificate(store, cert_id, where)
    return [(ref_table, i, where) for ref_table, ids in listed.items() for i in ids]


def _name(sel: Selection, store: BlobStore, digest: str) -> None:
    """A blob of the selection, verified now (read once), read again when it is written."""
    if digest not in sel.blobs:
        sel.blobs.name(digest, len(store.get_blob(digest)))


def _certificate(store: DocumentStore, cert_id: str, referrer: str) -> dict[str, Cell]:
    """A certificate a document names, as a bundle row (``doc`` as canonical JSON)."""
    record = store.get_certificate(cert_id)
    if record is None:
        raise BundleError(
            f"{referrer} names certificate {cert_id} which is not in store {store.location}; cannot export a partial bundle"
        )
    return dict(record.row())


# -- writing ----------------------------------------------------------------------
def index_members(sel: Selection) -> list[tuple[str, bytes]]:
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
    return members


def manifest_bytes(sel: Selection, index: list[tuple[str, bytes]]) -> bytes:
    from replaykit.core.versions import tool_versions

    digests: dict[str, MemberDigest] = {n: {"sha256": sha256_hex(d), "size": len(d)} for n, d in index}
    for digest in sorted(sel.blobs):  # a blob's name is its sha256
        digests[f"blobs/{digest}"] = {"sha256": digest, "size": sel.blobs.size(digest)}
    manifest: BundleManifest = {
        "format": FORMAT_NAME,
        "version": sel.version(),
        "tools": tool_versions(),
        "root": sel.root,
        "counts": sel.counts(),
        "members": digests,
    }
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")


class _Reader(io.RawIOBase):
    """A blob's chunks as the file object ``tarfile.addfile`` reads (no chunk copied but once)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.pending, self.at = chunks, memoryview(b""), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self.at >= len(self.pending):
            block = next(self.chunks, b"")
            if not block:
                return 0
            self.pending, self.at = memoryview(block), 0
        n = min(len(buffer), len(self.pending) - self.at)
        buffer[:n] = self.pending[self.at : self.at + n]
        self.at += n
        return n


def write_bundle(sel: Selection, out: BinaryIO, compress: bool = True) -> None:
    """The archive, streamed to ``out`` (a blob at a time): deterministic for the same
    content and tool versions."""
    index = index_members(sel)
    gz = _Gzip(out) if compress else None
    with tarfile.open(
        fileobj=cast(BinaryIO, gz) if gz else out, mode="w", format=tarfile.USTAR_FORMAT
    ) as tar:

        def add(name: str, size: int, source: BinaryIO) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = size, 0o644
            tar.addfile(normal_tarinfo(info), source)

        for name, data in [(MANIFEST, manifest_bytes(sel, index)), *index]:
            add(name, len(data), io.BytesIO(data))
        for digest in sorted(sel.blobs):
            reader = io.BufferedReader(_Reader(sel.blobs.chunks(digest)), 1 << 20)
            add(f"blobs/{digest}", sel.blobs.size(digest), cast(BinaryIO, reader))
    if gz is not None:
        gz.close()


class _Gzip(io.RawIOBase):
    """gzip as ``gzip.compress(data, 6, mtime=0)`` writes it (zlib's own header: mtime 0, OS 3),
    streamed: the same bytes as the archives exported before streaming."""

    def __init__(self, target: BinaryIO) -> None:
        self.target, self.size = target, 0
        self.zlib = zlib.compressobj(6, zlib.DEFLATED, 31)

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.size

    def write(self, data: Any) -> int:
        view = bytes(data)
        self.target.write(self.zlib.compress(view))
        self.size += len(view)
        return len(view)

    def close(self) -> None:
        if not self.closed:
            self.target.write(self.zlib.flush())
        super().close()


class _Counted(io.RawIOBase):
    """A file's bytes counted and hashed as they are written."""

    def __init__(self, target: BinaryIO) -> None:
        self.target, self.size, self.hash = target, 0, hashlib.sha256()

    def writable(self) -> bool:
        return True

    def tell(self) -> int:  # tarfile asks where it starts
        return self.size

    def write(self, data: Any) -> int:
        view = bytes(data)
        self.target.write(view)
        self.size += len(view)
        self.hash.update(view)
        return len(view)


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
    try:
        with atomic_writer(out) as target:  # 0644 like the user's other files
            counted = _Counted(target)
            write_bundle(sel, cast(BinaryIO, counted), is_gzip_name(out) if compress is None else compress)
    finally:
        sel.blobs.close()  # the images' spooled chunks
    return {
        "path": str(out),
        "root": sel.root,
        "counts": sel.counts(),
        "bytes": counted.size,
        "sha256": counted.hash.hexdigest(),
        "images": saved,
    }
