"""Files: writing one the user asked for atomically (whole or not at all) and with the
permissions any other file they create gets (``0666 & ~umask``: 0644 under the usual
umask), not ``mkstemp``'s private 0600; a finished folder put in place in one rename
(``replace_dir``); hashing and copying ones of any size in bounded
memory, sparse files kept sparse (``copy_sparse``, ``copy_tree``, ``file_sha256``)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A file to stream into, renamed over ``path`` once the block ends (removed if it raises);
    its mode is the umask's, like the user's other files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes) -> None:
    """``data`` into ``path``: a temporary file beside it, renamed over it once written."""
    with atomic_writer(path) as fh:
        fh.write(data)


def replace_dir(tmp: Path, target: Path) -> bool:
    """Put the finished folder ``tmp`` at ``target``. An existing ``target`` is moved aside in one
    rename and removed afterwards, so a reader sees the old folder or the new one, never one being
    emptied. False (``tmp`` removed) when another writer's folder landed at ``target`` meanwhile."""
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
        with contextlib.suppress(FileNotFoundError):  # another writer moved it first
            os.replace(target, aside / target.name)
        shutil.rmtree(aside, ignore_errors=True)
    try:
        os.replace(tmp, target)
    except OSError:  # a non-empty folder is there again: another writer's, as good as ours
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    return True


#: bytes read at a time when a file is hashed or copied: memory stays bounded whatever its size
CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read :data:`CHUNK` at a time (a 3 GiB file costs 1 MiB)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def _extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The (offset, length) of each data extent of a file (holes skipped); one extent for the
    whole file where the filesystem cannot say (no ``SEEK_DATA``)."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from here to the end
                return
            yield pos, size - pos  # SEEK_DATA unsupported here: read it all
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, end - start
        pos = end


def copy_sparse(source: str | Path, target: str | Path) -> str:
    """Copy a file's bytes and mode (``shutil.copytree``'s ``copy_function``), :data:`CHUNK` at a
    time, keeping its holes holes (and a block of zeros a hole): a 3 GiB sparse file is written
    as the few bytes it holds, not as 3 GiB. Times are copied as ``shutil.copy2`` does."""
    size = os.stat(source).st_size
    with open(source, "rb") as src, open(target, "wb") as dst:
        for offset, length in _extents(src.fileno(), size):
            src.seek(offset)
            done = 0
            while done < length and (block := src.read(min(CHUNK, length - done))):
                if block.count(0) != len(block):  # an all-zero block is left a hole
                    dst.seek(offset + done)
                    dst.write(block)
                done += len(block)
        dst.truncate(size)
    shutil.copystat(source, target)
    return str(target)


def copy_tree(source: Path, target: Path) -> None:
    """``shutil.copytree`` (symlinks kept as links) with :func:`copy_sparse` for every file."""
    shutil.copytree(source, target, symlinks=True, copy_function=copy_sparse, dirs_exist_ok=True)
