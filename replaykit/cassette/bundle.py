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
``cassettes`` (with every blob their episode documents reference) and the trees
of ``harness_sha`` and of each SHA under ``trees`` (with their file blobs); a
cassette also pulls in its harness tree when the store has it. Members are sorted and their metadata fixed, so the same content gives the same
bytes.

Import verifies everything before writing anything (see :func:`read_bundle`),
refuses an id that already exists in the target with other content, and writes
all rows and blobs in one transaction. Importing the same bundle twice is a no-op.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import tarfile
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

import sqlite_utils

from replaykit.cassette.codec import decode_episode
from replaykit.cassette.store import Store
from replaykit.determinism import SOURCE_DATE_EPOCH, canonical_json, sha256_hex
from replaykit.errors import CassetteNotFound, ReplaykitError

FORMAT_NAME = "replaykit-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TABLES = ("cassettes", "runs", "trees")
PK = {"cassettes": "id", "runs": "id", "trees": "sha"}
#: the column that says what a row *is*: equal values mean the same content
CONTENT = {"cassettes": "doc", "runs": "doc", "trees": "manifest"}
HEX64 = re.compile(r"[0-9a-f]{64}")
MEMBER_RE = re.compile(r"(manifest\.json|index/(cassettes|runs|trees)\.json|blobs/[0-9a-f]{64})")


class BundleError(ReplaykitError):
    """A bundle is malformed, tampered with, unsafe, or conflicts with the target store."""


@dataclass
class Selection:
    """Rows and blobs of one closed subset of a store (what a bundle holds)."""

    root: dict[str, str]
    rows: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: {t: {} for t in TABLES})
    blobs: dict[str, bytes] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {**{t: len(self.rows[t]) for t in TABLES}, "blobs": len(self.blobs)}


# -- references -----------------------------------------------------------------
def _ids(doc: dict[str, Any], name: str, where: str) -> list[str]:
    value = doc.get(name) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise BundleError(f"{where}: field {name!r} must be a list of ids")
    return list(value)


def doc_refs(doc: Any, where: str) -> dict[str, list[str]]:
    """The rows a runs-table document references: runs (+ verdicts), cassettes, trees."""
    if not isinstance(doc, dict):
        raise BundleError(f"{where} is not a JSON object")
    trees = _ids(doc, "trees", where)
    sha = doc.get("harness_sha")
    if sha:
        if not isinstance(sha, str):
            raise BundleError(f"{where}: field 'harness_sha' must be a string")
        trees.insert(0, sha)
    return {"runs": _ids(doc, "runs", where) + _ids(doc, "verdicts", where), "cassettes": _ids(doc, "cassettes", where), "trees": trees}


def episode_blobs(doc: Any, get: Callable[[str], bytes], where: str) -> tuple[set[str], Any]:
    """Every blob an episode document references (decoding it with ``get``), and the episode."""
    seen: set[str] = set()

    def fetch(digest: str) -> bytes:
        seen.add(digest)
        return get(digest)

    if not isinstance(doc, dict):
        raise BundleError(f"{where} is not a JSON object")
    try:
        episode = decode_episode(doc, fetch)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise BundleError(f"{where} is unreadable: {exc}") from None
    seen.update(e.snapshot for e in episode.env_events if e.snapshot)
    return seen, episode


def tree_blobs(manifest_text: Any, where: str) -> list[str]:
    """The file blobs of a tree manifest, refusing paths that would escape the tree."""
    try:
        manifest = json.loads(manifest_text)
        items = [(str(p), int(v[0]), str(v[1])) for p, v in manifest.items()]
    except (ValueError, TypeError, AttributeError, IndexError, KeyError):
        raise BundleError(f"{where}: manifest is not a {{path: [mode, blob]}} mapping") from None
    for path, _, digest in items:
        if not _safe_name(path):
            raise BundleError(f"{where}: unsafe file path {path!r} (absolute or with '..'); refusing")
        if not HEX64.fullmatch(digest):
            raise BundleError(f"{where}: file {path!r} has no valid blob hash")
    return [d for _, _, d in items]


def _safe_name(name: str) -> bool:
    if not name or name.startswith(("/", "\\")) or "\\" in name or "\x00" in name or re.match(r"^[A-Za-z]:", name):
        return False
    return all(part not in ("", ".", "..") for part in PurePosixPath(name).parts) and ".." not in name.split("/")


# -- collecting from a store ----------------------------------------------------
def _open_existing(store: Store) -> Store:
    if not (store.root / "index.db").is_file():
        raise CassetteNotFound(f"no store at {store.root} (no index.db); pass --store")
    return store


def resolve_root(store: Store, root_id: str) -> tuple[str, str]:
    """``(table, full id)`` of a run/training/verdict id or, failing that, a cassette id."""
    _open_existing(store)
    try:
        return "runs", store.resolve_id("runs", root_id, what="run")
    except CassetteNotFound:
        pass
    try:
        return "cassettes", store.resolve_id("cassettes", root_id, what="cassette")
    except CassetteNotFound:
        raise CassetteNotFound(f"no run, training or cassette {root_id!r} in store {store.root}; check the id or pass --store") from None


def _row(store: Store, table: str, key: str, referrer: str) -> dict[str, Any]:
    try:
        return dict(store.db[table].get(key))
    except sqlite_utils.db.NotFoundError:
        what = {"runs": "run", "cassettes": "cassette", "trees": "harness tree"}[table]
        raise BundleError(f"{referrer} references {what} {key} which is not in store {store.root}; cannot export a partial bundle") from None


def collect(store: Store, root_id: str) -> Selection:
    """The closed subset of ``store`` reachable from a run/training/verdict or cassette id."""
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
                sel.blobs[digest] = store.get_blob(digest)
            continue
        sel.blobs[row["doc"]] = store.get_blob(row["doc"])
        doc = json.loads(sel.blobs[row["doc"]])
        if table == "cassettes":
            refs, _ = episode_blobs(doc, store.get_blob, where)
            sel.blobs.update((d, store.get_blob(d)) for d in refs if d not in sel.blobs)
            if row.get("harness_sha") and store.has_tree(row["harness_sha"]):  # what replays it, when stored
                pending.append(("trees", row["harness_sha"], where))
            continue
        for ref_table, ids in doc_refs(doc, where).items():
            pending.extend((ref_table, i, where) for i in ids)
    return sel


# -- writing ----------------------------------------------------------------------
def _members(sel: Selection) -> list[tuple[str, bytes]]:
    members = [
        (f"index/{t}.json", (json.dumps([sel.rows[t][k] for k in sorted(sel.rows[t])], indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))
        for t in TABLES
    ]
    members += [(f"blobs/{h}", sel.blobs[h]) for h in sorted(sel.blobs)]
    return members


def bundle_bytes(sel: Selection, compress: bool = True) -> bytes:
    """The archive bytes: deterministic for the same content and tool versions."""
    from replaykit.versions import tool_versions

    members = _members(sel)
    manifest = {
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
            info.size, info.mtime, info.mode = len(data), SOURCE_DATE_EPOCH, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return gzip.compress(raw, compresslevel=6, mtime=0) if compress else raw


def is_gzip_name(path: Path | str) -> bool:
    return str(path).endswith((".gz", ".tgz"))


def export_bundle(store: Store, root_id: str, out: Path | str, compress: bool | None = None) -> dict[str, Any]:
    """Write the bundle of ``root_id`` to ``out`` (atomically); return a summary."""
    out = Path(out)
    sel = collect(store, root_id)
    data = bundle_bytes(sel, is_gzip_name(out) if compress is None else compress)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}-", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return {"path": str(out), "root": sel.root, "counts": sel.counts(), "bytes": len(data), "sha256": sha256_hex(data)}


# -- reading and verifying ---------------------------------------------------------
def _read_members(path: Path) -> dict[str, bytes]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BundleError(f"cannot read bundle {path}: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise BundleError(f"bundle {path} is truncated or corrupt (bad gzip stream); fetch it again") from None
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            for info in tar:
                name = info.name
                if not _safe_name(name):
                    raise BundleError(f"bundle {path}: member {name!r} escapes the archive (absolute or '..' path); refusing")
                if info.issym() or info.islnk():
                    raise BundleError(f"bundle {path}: member {name!r} is a link ({info.linkname!r}); refusing")
                if info.isdev():
                    raise BundleError(f"bundle {path}: member {name!r} is a device or fifo; refusing")
                if not info.isreg():
                    raise BundleError(f"bundle {path}: member {name!r} is not a regular file; refusing")
                if not MEMBER_RE.fullmatch(name):
                    raise BundleError(f"bundle {path}: unexpected member {name!r}; not a replaykit bundle")
                if name in members:
                    raise BundleError(f"bundle {path}: member {name!r} appears twice; refusing")
                fh = tar.extractfile(info)
                data = fh.read() if fh else b""
                if len(data) != info.size:
                    raise BundleError(f"bundle {path} is truncated (member {name!r} is cut short); fetch it again")
                members[name] = data
    except tarfile.TarError as exc:
        raise BundleError(f"bundle {path} is truncated or not a tar archive ({exc}); fetch it again") from None
    return members


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise BundleError(f"{what} is not valid JSON") from None


def _check_manifest(path: Path, members: dict[str, bytes]) -> dict[str, Any]:
    if MANIFEST not in members:
        raise BundleError(f"bundle {path} has no {MANIFEST}; not a replaykit bundle (or truncated)")
    manifest = _json(members[MANIFEST], f"bundle {path}: {MANIFEST}")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise BundleError(f"bundle {path}: {MANIFEST} does not name format {FORMAT_NAME!r}; not a replaykit bundle")
    if manifest.get("version") != FORMAT_VERSION:
        raise BundleError(
            f"bundle {path} has format version {manifest.get('version')!r}; this replaykit reads version {FORMAT_VERSION} — upgrade replaykit"
        )
    listed = manifest.get("members")
    if not isinstance(listed, dict):
        raise BundleError(f"bundle {path}: {MANIFEST} lists no members")
    for name, entry in sorted(listed.items()):
        if name not in members:
            raise BundleError(f"bundle {path} is truncated or incomplete: member {name!r} is missing")
        data = members[name]
        if not isinstance(entry, dict) or entry.get("size") != len(data):
            raise BundleError(f"bundle {path}: member {name!r} has {len(data)} bytes, the manifest says {entry.get('size') if isinstance(entry, dict) else '?'}; refusing")
        if entry.get("sha256") != sha256_hex(data):
            raise BundleError(f"bundle {path}: member {name!r} does not match its sha256 in the manifest (tampered or corrupt); refusing")
    extra = sorted(set(members) - set(listed) - {MANIFEST})
    if extra:
        raise BundleError(f"bundle {path}: member {extra[0]!r} is not in the manifest; refusing")
    root = manifest.get("root")
    if not isinstance(root, dict) or root.get("table") not in ("runs", "cassettes") or not isinstance(root.get("id"), str):
        raise BundleError(f"bundle {path}: {MANIFEST} has no valid root")
    return manifest


def _load_rows(path: Path, members: dict[str, bytes], sel: Selection) -> None:
    for table in TABLES:
        name = f"index/{table}.json"
        if name not in members:
            raise BundleError(f"bundle {path} is incomplete: member {name!r} is missing")
        rows = _json(members[name], f"bundle {path}: {name}")
        if not isinstance(rows, list):
            raise BundleError(f"bundle {path}: {name} must hold a list of rows")
        pk, content = PK[table], CONTENT[table]
        for row in rows:
            if not isinstance(row, dict) or not isinstance(row.get(pk), str) or not isinstance(row.get(content), str):
                raise BundleError(f"bundle {path}: {name} holds a row without {pk!r} and {content!r}")
            if row[pk] in sel.rows[table]:
                raise BundleError(f"bundle {path}: {name} lists {row[pk]} twice")
            sel.rows[table][row[pk]] = row


def _check_graph(path: Path, sel: Selection) -> None:
    def get(digest: str) -> bytes:
        if digest not in sel.blobs:
            raise BundleError(f"bundle {path}: blob {digest[:12]} is referenced but not in the bundle; refusing")
        return sel.blobs[digest]

    root = sel.root
    if root["id"] not in sel.rows[root["table"]]:
        raise BundleError(f"bundle {path}: its root {root['id']} is not among its rows")
    for key, row in sel.rows["trees"].items():
        for digest in tree_blobs(row["manifest"], f"bundle {path}: tree {key}"):
            get(digest)
    for table in ("cassettes", "runs"):
        for key, row in sel.rows[table].items():
            where = f"bundle {path}: {table[:-1]} {key}"
            doc = _json(get(row["doc"]), f"{where}: document")
            if table == "cassettes":
                refs, episode = episode_blobs(doc, get, where)
                for digest in refs:
                    get(digest)
                if episode.key.id != key:
                    raise BundleError(f"{where}: its document is for cassette {episode.key.id}, not {key}; refusing")
                if row.get("digest") not in (None, episode.digest):
                    raise BundleError(f"{where}: row digest does not match its events; refusing")
                continue
            if isinstance(doc, dict) and doc.get("run_id", key) != key:
                raise BundleError(f"{where}: its document is for run {doc.get('run_id')}, not {key}; refusing")
            for ref_table, ids in doc_refs(doc, where).items():
                for ref in ids:
                    if ref not in sel.rows[ref_table]:
                        raise BundleError(f"{where} references {ref_table[:-1]} {ref} which is not in the bundle; refusing")


def read_bundle(path: Path | str) -> Selection:
    """Read and verify a bundle completely, in memory; nothing is written anywhere.

    Checks: safe member names and types (no links, devices, '..' or absolute
    paths), the manifest's format and version, the sha256 and size of every
    member, every blob's hash against its name, every row's references (present
    in the bundle), cassette ids against their keys and digests against events.
    """
    path = Path(path)
    members = _read_members(path)
    manifest = _check_manifest(path, members)
    sel = Selection(root={k: str(v) for k, v in manifest["root"].items()}, manifest=manifest)
    for name, data in members.items():
        if name.startswith("blobs/"):
            digest = name[len("blobs/") :]
            if sha256_hex(data) != digest:
                raise BundleError(f"bundle {path}: blob {digest[:12]} does not hash to its name (tampered); refusing")
            sel.blobs[digest] = data
    _load_rows(path, members, sel)
    _check_graph(path, sel)
    return sel


def verify_bundle(path: Path | str, store: Store | None = None) -> dict[str, Any]:
    """Check a bundle without importing it; with ``store``, also what an import would do."""
    sel = read_bundle(path)
    report: dict[str, Any] = {
        "path": str(path), "ok": True, "format": FORMAT_NAME, "version": FORMAT_VERSION,
        "root": sel.root, "counts": sel.counts(), "tools": sel.manifest.get("tools", {}),
    }
    if store is not None:
        plan = _plan(store, sel, Path(path)) if _has_index(store) else _full_plan(sel)
        report["would_import"] = {k: len(v) for k, v in plan.items()}
    return report


# -- importing ----------------------------------------------------------------------
def _has_index(store: Store) -> bool:
    return (store.root / "index.db").is_file()


def _full_plan(sel: Selection) -> dict[str, list[Any]]:
    plan: dict[str, list[Any]] = {t: [sel.rows[t][k] for k in sorted(sel.rows[t])] for t in TABLES}
    plan["blobs"] = sorted(sel.blobs)
    return plan


def _present(store: Store, table: str, pk: str, cols: str, keys: list[str]) -> dict[str, Any]:
    if not store.db[table].exists():
        return {}
    found: dict[str, Any] = {}
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        sql = f"SELECT [{pk}], {cols} FROM [{table}] WHERE [{pk}] IN ({','.join('?' * len(chunk))})"
        found.update((str(r[0]), r[1]) for r in store.db.conn.execute(sql, chunk))
    return found


def _same(table: str, ours: Any, theirs: Any) -> bool:
    if table == "trees":
        try:
            return bool(json.loads(ours) == json.loads(theirs))
        except (TypeError, ValueError):
            return False
    return bool(ours == theirs)


def _plan(store: Store, sel: Selection, path: Path) -> dict[str, list[Any]]:
    """What importing ``sel`` would write; an id present with other content is refused."""
    plan: dict[str, list[Any]] = {}
    for table in TABLES:
        existing = _present(store, table, PK[table], f"[{CONTENT[table]}]", sorted(sel.rows[table]))
        plan[table] = []
        for key in sorted(sel.rows[table]):
            row = sel.rows[table][key]
            if key not in existing:
                plan[table].append(row)
            elif not _same(table, row[CONTENT[table]], existing[key]):
                what = {"runs": "run", "cassettes": "cassette", "trees": "harness tree"}[table]
                raise BundleError(
                    f"{what} {key} already exists in store {store.root} with other content; refusing to import {path} "
                    "(import into another store, or remove that id first)"
                )
    have = _present(store, "blobs", "hash", "1", sorted(sel.blobs))
    plan["blobs"] = [h for h in sorted(sel.blobs) if h not in have]
    return plan


def import_bundle(store: Store, path: Path | str) -> dict[str, Any]:
    """Verify a bundle completely, then write all its rows and blobs in one transaction.

    Nothing is written (not even an empty ``index.db``) unless the whole bundle
    verifies and none of its ids exists in ``store`` with other content. Rows and
    blobs already present are left alone: importing the same bundle twice is a no-op.
    """
    path = Path(path)
    sel = read_bundle(path)
    plan = _plan(store, sel, path) if _has_index(store) else _full_plan(sel)
    report: dict[str, Any] = {"path": str(path), "store": str(store.root), "root": sel.root, "counts": sel.counts()}
    if any(plan.values()):
        with store.db.atomic():
            plan = _plan(store, sel, path)  # again inside the transaction: no writer slipped in between
            store.db.conn.executemany(
                "INSERT OR IGNORE INTO blobs(hash, size, data) VALUES (?, ?, ?)",
                ((h, len(sel.blobs[h]), sel.blobs[h]) for h in plan["blobs"]),
            )
            for table in TABLES:
                if plan[table]:
                    store.db[table].insert_all(plan[table], pk=PK[table], alter=True)
    report["imported"] = {k: len(v) for k, v in plan.items()}
    report["noop"] = not any(plan.values())
    return report
