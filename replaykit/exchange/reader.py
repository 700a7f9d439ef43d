"""Reading a bundle (writing nothing to any store): the archive streamed member by
member, each checked against the manifest (which comes first) before its data is
read, the decompressed total and each member capped; blobs go to a scratch spool as
they stream past, hashed on the way (``exchange/spool.py``: the memory a bundle takes
does not grow with it); then verified completely (:mod:`~replaykit.exchange.verifier`)
into a :class:`Selection`.
"""

from __future__ import annotations

import gzip
import os
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from replaykit.cassette.integrity import safe_path
from replaykit.core.determinism import sha256_hex
from replaykit.exchange.bundle_format import MANIFEST, MEMBER_RE, BundleError, Members, Selection, parse_json
from replaykit.exchange.spool import sweep
from replaykit.exchange.verifier import (
    check_blobs,
    check_graph,
    check_manifest,
    load_certificates,
    load_rows,
)

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


def _pieces(fh: IO[bytes] | None) -> Iterator[bytes]:
    while fh is not None:
        block = fh.read(CHUNK)
        if not block:
            return
        yield block


def read_members(path: Path, cap: int | None = None) -> Members:
    """Stream the archive (gzip or plain): a blob never held in memory (spooled as it passes),
    each member checked against the manifest (which comes first) before its data is read,
    the decompressed total capped (a bundle bomb is refused early, in bounded memory)."""
    members = Members()
    try:
        _stream(path, members, max_bytes() if cap is None else cap)
    except BaseException:
        members.blobs.close()
        raise
    return members


def _stream(path: Path, members: Members, cap: int) -> None:
    member_cap = min(cap, int(os.environ.get("REPLAYKIT_BUNDLE_MAX_MEMBER_BYTES") or MAX_MEMBER_BYTES))
    listed: dict[str, object] | None = None
    total = 0
    raw, fileobj = _open(path)
    try:
        with raw, fileobj, tarfile.open(fileobj=fileobj, mode="r|") as tar:
            for info in tar:
                _check_kind(path, info)
                if info.name in members.digests:
                    raise BundleError(f"bundle {path}: member {info.name!r} appears twice; refusing")
                total += info.size
                _check_size(path, info, total, cap, member_cap)
                _check_listed(path, info, listed)
                _read_member(path, tar, info, members)
                if info.name == MANIFEST:
                    listed = _listed(path, members.data[MANIFEST])
            while fileobj.read(CHUNK):  # to the end: a cut gzip trailer is truncation too
                pass
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        if isinstance(exc, tarfile.TarError) and "bad checksum" not in str(exc) and not members.digests:
            raise BundleError(
                f"bundle {path} is truncated or not a tar archive ({exc}); fetch it again"
            ) from None
        raise BundleError(
            f"bundle {path} is truncated or corrupt ({type(exc).__name__}); fetch it again"
        ) from None


def _open(path: Path) -> tuple[Any, Any]:
    """The bundle's file and the stream of its tar (through gzip when it is gzipped)."""
    try:
        raw = open(path, "rb")
        magic = raw.read(2)
        raw.seek(0)
    except OSError as exc:
        raise BundleError(f"cannot read bundle {path}: {exc.strerror or exc}") from None
    # gzip.GzipFile checks the CRC and length trailer (tarfile's stream mode does not)
    fileobj: Any = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
    return raw, fileobj


def _check_kind(path: Path, info: tarfile.TarInfo) -> None:
    """A member is a regular file under a safe name a bundle has."""
    name = info.name
    if not safe_path(name):
        raise BundleError(
            f"bundle {path}: member {name!r} escapes the archive (absolute or '..' path); refusing"
        )
    if info.issym() or info.islnk():
        raise BundleError(f"bundle {path}: member {name!r} is a link ({info.linkname!r}); refusing")
    if info.isdev():
        raise BundleError(f"bundle {path}: member {name!r} is a device or fifo; refusing")
    if not info.isreg():
        raise BundleError(f"bundle {path}: member {name!r} is not a regular file; refusing")
    if not MEMBER_RE.fullmatch(name):
        raise BundleError(f"bundle {path}: unexpected member {name!r}; not a replaykit bundle")


def _check_size(path: Path, info: tarfile.TarInfo, total: int, cap: int, member_cap: int) -> None:
    """The decompressed total so far within ``cap``, the member within ``member_cap``."""
    if total > cap:
        raise BundleError(
            f"bundle {path} decompresses to more than {cap} bytes (the cap); refusing "
            "(raise it with REPLAYKIT_BUNDLE_MAX_BYTES if the bundle is trusted)"
        )
    if info.size > member_cap:
        raise BundleError(
            f"bundle {path}: member {info.name!r} holds {info.size} bytes, more than {member_cap}; refusing"
        )


def _check_listed(path: Path, info: tarfile.TarInfo, listed: dict[str, object] | None) -> None:
    """The manifest comes first; every later member is listed in it with its size."""
    name = info.name
    if listed is None:
        if name != MANIFEST:
            raise BundleError(
                f"bundle {path}: its first member is {name!r}, not {MANIFEST}; not a replaykit bundle"
            )
        return
    entry = listed.get(name)
    if not isinstance(entry, dict):
        raise BundleError(f"bundle {path}: member {name!r} is not in the manifest; refusing")
    if entry.get("size") != info.size:
        raise BundleError(
            f"bundle {path}: member {name!r} has {info.size} bytes, the manifest says {entry.get('size')}; refusing"
        )


def _read_member(path: Path, tar: tarfile.TarFile, info: tarfile.TarInfo, members: Members) -> None:
    """A member read: a blob spooled (hashed on the way, never whole), anything else kept; a
    member cut short is truncation."""
    name = info.name
    fh = tar.extractfile(info)
    if name.startswith("blobs/"):
        digest, got = members.blobs.spool(_pieces(fh))
    else:
        data = b"".join(_pieces(fh))
        digest, got = sha256_hex(data), len(data)
        members.data[name] = data
    if got != info.size:
        raise BundleError(f"bundle {path} is truncated (member {name!r} is cut short); fetch it again")
    members.digests[name] = (got, digest)


def _listed(path: Path, data: bytes) -> dict[str, object]:
    """The members the manifest lists (none when it lists them wrongly: check_manifest says so)."""
    manifest = parse_json(data, f"bundle {path}: {MANIFEST}")
    if isinstance(manifest, dict) and isinstance(manifest.get("members"), dict):
        return dict(manifest["members"])
    return {}


def read_bundle(path: Path | str) -> Selection:
    """Read and verify a bundle completely; nothing is written to any store (its blobs wait
    in a scratch spool, removed by ``sel.blobs.close()`` or when the selection is collected).

    Checks: safe member names and types (no links, devices, '..' or absolute
    paths), the manifest's format and version, the sha256 and size of every
    member, every blob's hash against its name, every row's references (present
    in the bundle), cassette ids against their keys and digests against events.
    """
    path = Path(path)
    sweep()  # what a killed import left in $TMPDIR
    return verified_selection(path, read_members(path))


def verified_selection(path: Path | str, members: Members) -> Selection:
    """The members of a bundle (read from its archive, or pulled from a registry: ``path`` names
    where) verified completely into a :class:`Selection`; its spool is removed on a refusal."""
    try:
        manifest = check_manifest(path, members)
        sel = Selection(root=manifest["root"], manifest=manifest, blobs=members.blobs)
        check_blobs(path, members, sel)
        load_rows(path, members, sel)
        load_certificates(path, members, sel)
        check_graph(path, sel)
    except BaseException:
        members.blobs.close()
        raise
    return sel
