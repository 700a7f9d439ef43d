"""Container state after a step: a digest of the filesystem diff, or a full snapshot.

``state_digest`` hashes the container's filesystem diff (every path added, changed
or deleted since the image) together with the content of what was added or changed:
under each *root* of the change (an added path whose parent was not added, or a
changed leaf) every entry contributes its path, type, permission bits and content
hash (or link target). Modification times, owners and container IDs never enter, so
identical runs give identical digests.

Where the daemon's overlay2 upper directory is readable from this process (a local
daemon, run as root), the diff and the contents are read from it directly (a few
milliseconds); otherwise through ``container.diff()`` and ``get_archive`` (the
daemon's own diff of an overlay layer can take half a second).

``full_snapshot`` is a normalised tar (sorted members, mtime ``SOURCE_DATE_EPOCH``,
owner 0, no user names) of the workdir plus every changed root outside it, and a
``.replaykit/deleted.txt`` member listing deleted paths. Equal states give equal bytes.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import stat
import tarfile
from pathlib import Path
from typing import Any, Iterator

from replaykit.core.determinism import SOURCE_DATE_EPOCH, normal_tarinfo, sha256_hex
from replaykit.core.errors import EnvError

MODIFIED, ADDED, DELETED = 0, 1, 2
_KIND = {MODIFIED: "C", ADDED: "A", DELETED: "D"}


def overlay_dirs(container: Any) -> tuple[Path, list[Path]] | None:
    """(upper dir, lower dirs) of an overlay2 container when readable here, else None."""
    driver = container.attrs.get("GraphDriver") or {}
    data = driver.get("Data") or {}
    upper = data.get("UpperDir")
    if driver.get("Name") not in ("overlay2", "overlay") or not upper:
        return None
    if not (os.path.isdir(upper) and os.access(upper, os.R_OK | os.X_OK)):
        return None
    return Path(upper), [Path(p) for p in str(data.get("LowerDir") or "").split(":") if p]


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _overlay_changes(upper: Path, lowers: list[Path]) -> list[tuple[str, int]]:
    out = []
    for dirpath, dirnames, filenames in os.walk(upper):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = "/" + os.path.relpath(full, upper)
            if _is_whiteout(os.lstat(full)):
                out.append((rel, DELETED))
            elif any(os.path.lexists(str(lower) + rel) for lower in lowers):
                out.append((rel, MODIFIED))
            else:
                out.append((rel, ADDED))
    return sorted(out)


def read_file(container: Any, path: str, limit: int = -1) -> bytes | None:
    """A regular file's bytes from the container, at most ``limit`` when given (None when it
    does not exist)."""
    dirs = overlay_dirs(container)
    if dirs is not None:
        candidate = str(dirs[0]) + path
        if os.path.isfile(candidate) and not os.path.islink(candidate):
            with open(candidate, "rb") as f:
                return f.read(limit)
    for _, info, content in _archive(container, path):
        if info.isreg():
            data = content if isinstance(content, bytes) else b""
            return data if limit < 0 else data[:limit]
    return None


def changes(container: Any) -> list[tuple[str, int]]:
    """``(path, kind)`` of the container's filesystem diff, sorted by path."""
    dirs = overlay_dirs(container)
    if dirs is not None:
        return _overlay_changes(*dirs)
    try:
        entries = container.diff() or []
    except Exception as exc:  # docker.errors.APIError and transport errors
        raise EnvError(f"cannot read the filesystem diff of container {container.name}: {exc}") from None
    return sorted((str(e["Path"]), int(e["Kind"])) for e in entries)


def change_roots(entries: list[tuple[str, int]]) -> list[str]:
    """The fewest paths whose archives hold every added or changed file."""
    kinds = dict(entries)
    parents_with_children = {posixpath.dirname(p) for p in kinds}
    roots = []
    for path, kind in entries:
        if kind == DELETED:
            continue
        covered = False
        parent = posixpath.dirname(path)
        while parent not in ("/", ""):
            if kinds.get(parent) == ADDED:
                covered = True
                break
            parent = posixpath.dirname(parent)
        if covered:
            continue
        if kind == ADDED or path not in parents_with_children:
            roots.append(path)
    return roots


class _Chunks(io.RawIOBase):
    """A readable file over an iterator of byte chunks (the Docker archive stream)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks, self.pending = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            try:
                self.pending = next(self.chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self.pending))
        buffer[:n], self.pending = self.pending[:n], self.pending[n:]
        return n


def _archive(
    container: Any, path: str, digest_only: bool = False
) -> Iterator[tuple[str, tarfile.TarInfo, bytes | str | None]]:
    """Members of ``get_archive(path)`` as (absolute path without leading /, info, content),
    streamed; with ``digest_only`` a file's content is its sha256 (hashed in chunks)."""
    import docker.errors

    try:
        stream, _ = container.get_archive(path)
        fileobj = io.BufferedReader(_Chunks(iter(stream)), CHUNK)
        fileobj.peek(1)  # the request's errors surface here, not mid-walk
    except docker.errors.NotFound:
        return  # vanished between diff and archive (a path the step deleted again)
    except Exception as exc:
        raise EnvError(f"cannot read {path} from container {container.name}: {exc}") from None
    base = posixpath.dirname(path.rstrip("/")).lstrip("/")
    with tarfile.open(fileobj=fileobj, mode="r|") as tar:
        for info in tar:
            name = posixpath.normpath(posixpath.join(base, info.name)).lstrip("/")
            content: bytes | str | None = None
            if info.isreg():
                f = tar.extractfile(info)
                if f is None:
                    content = b""
                else:
                    content = _file_sha256(f) if digest_only else f.read()
            yield name, info, content


CHUNK = 1 << 20


def _file_sha256(f: Any) -> str:
    """sha256 of a file object, read in 1 MiB chunks (a task writing gigabytes costs no memory)."""
    h = hashlib.sha256()
    for block in iter(lambda: f.read(CHUNK), b""):
        h.update(block)
    return h.hexdigest()


def _overlay_members(
    upper: Path, path: str, digest_only: bool = False
) -> Iterator[tuple[str, tarfile.TarInfo, bytes | str | None]]:
    """The same members ``_archive`` would give, read from the upper dir (a root is
    wholly in the upper dir: it was added, or it is a changed leaf)."""
    top = str(upper) + path
    if not os.path.lexists(top):
        return
    items = [top]
    if os.path.isdir(top) and not os.path.islink(top):
        for dirpath, dirnames, filenames in os.walk(top):
            items.extend(os.path.join(dirpath, n) for n in dirnames + filenames)
    for full in items:
        st = os.lstat(full)
        name = os.path.relpath(full, upper)
        info = tarfile.TarInfo(name)
        info.mode = st.st_mode & 0o7777
        content: bytes | str | None = None
        if stat.S_ISREG(st.st_mode):
            info.type = tarfile.REGTYPE
            with open(full, "rb") as f:
                content = _file_sha256(f) if digest_only else f.read()
            info.size = st.st_size
        elif stat.S_ISLNK(st.st_mode):
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(full)
        elif stat.S_ISDIR(st.st_mode):
            info.type = tarfile.DIRTYPE
        else:
            info.type = tarfile.CHRTYPE if stat.S_ISCHR(st.st_mode) else tarfile.FIFOTYPE
        yield name, info, content


def _entry(name: str, info: tarfile.TarInfo, content: bytes | str | None) -> str:
    """One line of the state digest; ``content`` is a file's bytes or already its sha256."""
    mode = f"{info.mode & 0o7777:o}"
    if info.isreg():
        return f"F\0{name}\0{mode}\0{content if isinstance(content, str) else sha256_hex(content or b'')}"
    if info.issym():
        return f"L\0{name}\0{info.linkname}"
    if info.islnk():
        return f"H\0{name}\0{info.linkname}"
    if info.isdir():
        return f"D\0{name}\0{mode}"
    return f"O\0{name}\0{info.type!r}"


def state_digest(container: Any) -> str:
    """sha256 over the diff entries and the content of every added or changed path."""
    entries = changes(container)
    h = hashlib.sha256()
    for path, kind in entries:
        h.update(f"{_KIND.get(kind, kind)}\0{path}\n".encode("utf-8", "surrogateescape"))
    dirs = overlay_dirs(container)
    lines: list[str] = []
    for root in change_roots(entries):
        members = (
            _overlay_members(dirs[0], root, digest_only=True)
            if dirs is not None
            else _archive(container, root, digest_only=True)
        )
        lines.extend(_entry(name, info, content) for name, info, content in members)
    for line in sorted(lines):
        h.update(line.encode("utf-8", "surrogateescape") + b"\n")
    return h.hexdigest()


def _normalised(info: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    out = tarfile.TarInfo(name)
    out.type = info.type
    out.mode = info.mode & 0o7777
    out.linkname = info.linkname
    out.size = info.size if info.isreg() else 0
    return normal_tarinfo(out)


def full_snapshot(container: Any, workdir: str) -> bytes:
    """A normalised tar of the workdir and every changed root (see module doc)."""
    entries = changes(container)
    workdir = "/" + workdir.strip("/")
    roots = [workdir] + [
        r for r in change_roots(entries) if not (r == workdir or r.startswith(workdir + "/"))
    ]
    members: dict[str, tuple[tarfile.TarInfo, bytes | None]] = {}
    for root in roots:
        for name, info, content in _archive(container, root):
            members.setdefault(name, (info, content if not isinstance(content, str) else None))
    deleted = "".join(f"{path}\n" for path, kind in entries if kind == DELETED).encode(
        "utf-8", "surrogateescape"
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info, content = members[name]
            tar.addfile(_normalised(info, name), io.BytesIO(content) if content is not None else None)
        marker = tarfile.TarInfo(".replaykit/deleted.txt")
        marker.size, marker.mtime, marker.mode = len(deleted), SOURCE_DATE_EPOCH, 0o644
        tar.addfile(marker, io.BytesIO(deleted))
    return buf.getvalue()


def restore_full(container: Any, data: bytes) -> list[str]:
    """Put a ``full_snapshot``'s members back into a fresh container of the same image; the
    paths it lists as deleted, for the caller to remove (``rm -rf`` inside the container)."""
    src = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
    buf = io.BytesIO()
    deleted: list[str] = []
    with src, tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as out:
        for info in src.getmembers():
            if info.name == ".replaykit/deleted.txt":
                f = src.extractfile(info)
                text = f.read().decode("utf-8", "surrogateescape") if f else ""
                deleted = [line for line in text.splitlines() if line]
                continue
            out.addfile(info, src.extractfile(info) if info.isreg() else None)
    if not container.put_archive("/", buf.getvalue()):
        raise EnvError(f"cannot restore a snapshot into container {container.name}")
    return deleted
