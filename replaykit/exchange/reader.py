"""What a replaykit bundle is, and how one is read and checked (in memory, writing nothing).

See :mod:`replaykit.exchange.bundle` for the layout and for export/import. This
module holds the format constants, the reference walkers shared by export and
import, and :func:`read_bundle`: safe member names and types, the manifest's
format and version, every member's sha256 and size, every blob's hash against its
name, and every row's references.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from replaykit.cassette.codec import decode_episode
from replaykit.cassette.integrity import (
    cassette_columns,
    cassette_mismatches,
    doc_mismatches,
    run_episode_mismatches,
)
from replaykit.determinism import sha256_hex
from replaykit.errors import ReplaykitError

FORMAT_NAME = "replaykit-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
TABLES = ("cassettes", "runs", "trees")
PK = {"cassettes": "id", "runs": "id", "trees": "sha"}
#: the column that says what a row *is*: equal values mean the same content
CONTENT = {"cassettes": "doc", "runs": "doc", "trees": "manifest"}
HEX64 = re.compile(r"[0-9a-f]{64}")
COLUMN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
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
    """What a runs-table document references: rows under ``runs`` (+ ``verdicts``),
    ``cassettes`` and ``trees`` (+ ``harness_sha``), and blobs listed under ``blobs``."""
    if not isinstance(doc, dict):
        raise BundleError(f"{where} is not a JSON object")
    trees = _ids(doc, "trees", where)
    sha = doc.get("harness_sha")
    if sha:
        if not isinstance(sha, str):
            raise BundleError(f"{where}: field 'harness_sha' must be a string")
        trees.insert(0, sha)
    blobs = _ids(doc, "blobs", where)
    bad = next((b for b in blobs if not HEX64.fullmatch(b)), None)
    if bad is not None:
        raise BundleError(f"{where}: {bad[:40]!r} under 'blobs' is not a sha256 blob hash")
    return {
        "runs": _ids(doc, "runs", where) + _ids(doc, "verdicts", where),
        "cassettes": _ids(doc, "cassettes", where),
        "trees": trees,
        "blobs": blobs,
    }


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
    if (
        not name
        or name.startswith(("/", "\\"))
        or "\\" in name
        or "\x00" in name
        or re.match(r"^[A-Za-z]:", name)
    ):
        return False
    return all(part not in ("", ".", "..") for part in PurePosixPath(name).parts) and ".." not in name.split(
        "/"
    )


# -- reading and verifying ---------------------------------------------------------
#: default cap on a bundle's decompressed size (``REPLAYKIT_BUNDLE_MAX_BYTES`` overrides)
MAX_BYTES = 4 << 30
#: no single member is held in memory past this (a blob that large is refused;
#: ``REPLAYKIT_BUNDLE_MAX_MEMBER_BYTES`` overrides)
MAX_MEMBER_BYTES = 128 << 20
CHUNK = 1 << 20


def max_bytes() -> int:
    raw = os.environ.get("REPLAYKIT_BUNDLE_MAX_BYTES", "")
    try:
        return int(raw) if raw else MAX_BYTES
    except ValueError:
        raise BundleError(f"REPLAYKIT_BUNDLE_MAX_BYTES={raw!r} is not a number of bytes") from None


def _read_members(path: Path, cap: int | None = None) -> dict[str, bytes]:
    """Stream the archive (gzip or plain): never more than one member in memory beyond
    those kept, each checked against the manifest (which comes first) before its data is
    read, the decompressed total capped (a bundle bomb is refused early, in bounded memory)."""
    cap = max_bytes() if cap is None else cap
    member_cap = min(cap, int(os.environ.get("REPLAYKIT_BUNDLE_MAX_MEMBER_BYTES") or MAX_MEMBER_BYTES))
    members: dict[str, bytes] = {}
    listed: dict[str, Any] | None = None
    total = 0
    try:
        raw = open(path, "rb")
        magic = raw.read(2)
        raw.seek(0)
    except OSError as exc:
        raise BundleError(f"cannot read bundle {path}: {exc.strerror or exc}") from None
    # gzip.GzipFile checks the CRC and length trailer (tarfile's stream mode does not)
    fileobj: Any = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
    try:
        with raw, fileobj, tarfile.open(fileobj=fileobj, mode="r|") as tar:
            for info in tar:
                name = info.name
                if not _safe_name(name):
                    raise BundleError(
                        f"bundle {path}: member {name!r} escapes the archive (absolute or '..' path); refusing"
                    )
                if info.issym() or info.islnk():
                    raise BundleError(
                        f"bundle {path}: member {name!r} is a link ({info.linkname!r}); refusing"
                    )
                if info.isdev():
                    raise BundleError(f"bundle {path}: member {name!r} is a device or fifo; refusing")
                if not info.isreg():
                    raise BundleError(f"bundle {path}: member {name!r} is not a regular file; refusing")
                if not MEMBER_RE.fullmatch(name):
                    raise BundleError(f"bundle {path}: unexpected member {name!r}; not a replaykit bundle")
                if name in members:
                    raise BundleError(f"bundle {path}: member {name!r} appears twice; refusing")
                total += info.size
                if total > cap:
                    raise BundleError(
                        f"bundle {path} decompresses to more than {cap} bytes (the cap); refusing "
                        "(raise it with REPLAYKIT_BUNDLE_MAX_BYTES if the bundle is trusted)"
                    )
                if info.size > member_cap:
                    raise BundleError(
                        f"bundle {path}: member {name!r} holds {info.size} bytes, more than {member_cap}; refusing"
                    )
                if listed is not None:
                    entry = listed.get(name)
                    if not isinstance(entry, dict):
                        raise BundleError(f"bundle {path}: member {name!r} is not in the manifest; refusing")
                    if entry.get("size") != info.size:
                        raise BundleError(
                            f"bundle {path}: member {name!r} has {info.size} bytes, the manifest says {entry.get('size')}; refusing"
                        )
                elif name != MANIFEST:
                    raise BundleError(
                        f"bundle {path}: its first member is {name!r}, not {MANIFEST}; not a replaykit bundle"
                    )
                fh = tar.extractfile(info)
                parts: list[bytes] = []
                got = 0
                while fh is not None:
                    block = fh.read(CHUNK)
                    if not block:
                        break
                    got += len(block)
                    parts.append(block)
                data = b"".join(parts)
                if got != info.size:
                    raise BundleError(
                        f"bundle {path} is truncated (member {name!r} is cut short); fetch it again"
                    )
                members[name] = data
                if name == MANIFEST:
                    manifest = _json(data, f"bundle {path}: {MANIFEST}")
                    listed = (
                        manifest.get("members")
                        if isinstance(manifest, dict) and isinstance(manifest.get("members"), dict)
                        else {}
                    )
            while fileobj.read(CHUNK):  # to the end: a cut gzip trailer is truncation too
                pass
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        if isinstance(exc, tarfile.TarError) and "bad checksum" not in str(exc) and not members:
            raise BundleError(
                f"bundle {path} is truncated or not a tar archive ({exc}); fetch it again"
            ) from None
        raise BundleError(
            f"bundle {path} is truncated or corrupt ({type(exc).__name__}); fetch it again"
        ) from None
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
        raise BundleError(
            f"bundle {path}: {MANIFEST} does not name format {FORMAT_NAME!r}; not a replaykit bundle"
        )
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
            raise BundleError(
                f"bundle {path}: member {name!r} has {len(data)} bytes, the manifest says {entry.get('size') if isinstance(entry, dict) else '?'}; refusing"
            )
        if entry.get("sha256") != sha256_hex(data):
            raise BundleError(
                f"bundle {path}: member {name!r} does not match its sha256 in the manifest (tampered or corrupt); refusing"
            )
    extra = sorted(set(members) - set(listed) - {MANIFEST})
    if extra:
        raise BundleError(f"bundle {path}: member {extra[0]!r} is not in the manifest; refusing")
    root = manifest.get("root")
    if (
        not isinstance(root, dict)
        or root.get("table") not in ("runs", "cassettes")
        or not isinstance(root.get("id"), str)
    ):
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
            if (
                not isinstance(row, dict)
                or not isinstance(row.get(pk), str)
                or not isinstance(row.get(content), str)
            ):
                raise BundleError(f"bundle {path}: {name} holds a row without {pk!r} and {content!r}")
            bad = [
                c
                for c, v in row.items()
                if not COLUMN_RE.fullmatch(c) or not isinstance(v, (str, int, float, type(None)))
            ]
            if bad:
                raise BundleError(
                    f"bundle {path}: {name} row {row[pk]} has an invalid column {bad[0][:40]!r}; refusing"
                )
            if row[pk] in sel.rows[table]:
                raise BundleError(f"bundle {path}: {name} lists {row[pk]} twice")
            sel.rows[table][row[pk]] = row


def _check_graph(path: Path, sel: Selection) -> None:
    def get(digest: str) -> bytes:
        if digest not in sel.blobs:
            raise BundleError(
                f"bundle {path}: blob {digest[:12]} is referenced but not in the bundle; refusing"
            )
        return sel.blobs[digest]

    root = sel.root
    if root["id"] not in sel.rows[root["table"]]:
        raise BundleError(f"bundle {path}: its root {root['id']} is not among its rows")
    for key, row in sel.rows["trees"].items():
        for digest in tree_blobs(row["manifest"], f"bundle {path}: tree {key}"):
            get(digest)
    derived: dict[str, dict[str, Any]] = {}
    for table in ("cassettes", "runs"):
        for key, row in sel.rows[table].items():
            where = f"bundle {path}: {table[:-1]} {key}"
            doc = _json(get(row["doc"]), f"{where}: document")
            if table == "cassettes":
                refs, episode = episode_blobs(doc, get, where)
                for digest in refs:
                    get(digest)
                if episode.key.id != key:
                    raise BundleError(
                        f"{where}: its document is for cassette {episode.key.id}, not {key}; refusing"
                    )
                derived[key] = cassette_columns(
                    episode
                )  # recomputed from the events, never trusted from the row
                bad = cassette_mismatches(row, episode, derived[key])
                if bad:
                    raise BundleError(
                        f"{where}: column(s) {', '.join(bad)} do not match its events (forged or corrupt); refusing"
                    )
                continue
            bad = doc_mismatches(dict(row, kind=row.get("kind") or "measure"), doc)
            if bad:
                raise BundleError(f"{where}: {'; '.join(bad)} (row and document disagree); refusing")
            for entry in doc.get("episodes") or [] if row.get("kind", "measure") == "measure" else []:
                cid = entry.get("cassette_id") if isinstance(entry, dict) else None
                if cid not in derived and cid not in sel.rows["cassettes"]:
                    raise BundleError(
                        f"{where} references cassette {cid} which is not in the bundle; refusing"
                    )
                wrong = run_episode_mismatches(entry, derived[cid]) if cid in derived else []
                if wrong:
                    raise BundleError(
                        f"{where}: episode {cid} field(s) {', '.join(wrong)} do not match its cassette (forged or corrupt); refusing"
                    )
            listed = doc_refs(doc, where)
            for digest in listed.pop("blobs"):
                get(digest)
            for ref_table, ids in listed.items():
                for ref in ids:
                    if ref not in sel.rows[ref_table]:
                        raise BundleError(
                            f"{where} references {ref_table[:-1]} {ref} which is not in the bundle; refusing"
                        )


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
                raise BundleError(
                    f"bundle {path}: blob {digest[:12]} does not hash to its name (tampered); refusing"
                )
            sel.blobs[digest] = data
    _load_rows(path, members, sel)
    _check_graph(path, sel)
    return sel
