"""A selection's blobs, none of them held in memory: bundles are streamed.

:class:`Blobs` maps a blob's sha256 to its bytes like a dict, but keeps no bytes: a blob
read from a bundle is written to a scratch folder as it streams past (hashed on the way),
one collected from a store is only named (read again, verified against its address, when
it is written out), and one an export adds (an image's chunk) is spooled too. Reading one
gives its bytes, one blob at a time; ``size`` and ``chunks`` serve the streaming writers.
Peak memory is a blob, whatever the size of the bundle (benchmarks/bundle_size.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator, MutableMapping
from pathlib import Path
from typing import Protocol

from replaykit.core.stale import clean_dead_temp, owned_temp_dir

CHUNK = 1 << 20
#: the ``$TMPDIR`` folders moving a bundle makes (``core.stale.owned_temp_dir``): this spool, a
#: pull's layers, an import's scratch checks, a reproduction's store. A ``kill -9`` leaves them;
#: the next import, pull or reproduce removes those whose process is gone (:func:`sweep`)
TEMP_KINDS = ("blobs", "pull", "verify", "bundle-check", "reproduce")


def sweep() -> list[Path]:
    """Remove what killed imports, pulls and reproductions left in ``$TMPDIR``."""
    return clean_dead_temp(TEMP_KINDS)


class BlobSource(Protocol):
    def get_blob(self, digest: str) -> bytes: ...


class Blobs(MutableMapping[str, bytes]):
    """sha256 -> bytes, read on demand: from the spool folder, else from ``store``."""

    def __init__(self, store: BlobSource | None = None) -> None:
        self._store = store
        self._sizes: dict[str, int] = {}
        self._spooled: set[str] = set()
        self._dir: Path | None = None
        self._finalizer: weakref.finalize[..., Blobs] | None = None

    def _folder(self) -> Path:
        if self._dir is None:
            self._dir = owned_temp_dir("blobs")
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self._dir), True)
        return self._dir

    # -- filling ---------------------------------------------------------------------
    def spool(self, chunks: Iterable[bytes]) -> tuple[str, int]:
        """Write a stream to the spool; its sha256 and size (kept under that name)."""
        folder = self._folder()
        fd, tmp = tempfile.mkstemp(prefix=".part-", dir=folder)
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        name = digest.hexdigest()
        os.replace(tmp, folder / name)
        self._sizes[name] = size
        self._spooled.add(name)
        return name, size

    def name(self, digest: str, size: int) -> None:
        """A blob of the store, read again when it is wanted."""
        if digest not in self._spooled:
            self._sizes[digest] = size

    def __setitem__(self, digest: str, data: bytes) -> None:
        folder = self._folder()
        fd, tmp = tempfile.mkstemp(prefix=".part-", dir=folder)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, folder / digest)
        self._sizes[digest] = len(data)
        self._spooled.add(digest)

    # -- reading ---------------------------------------------------------------------
    def __getitem__(self, digest: str) -> bytes:
        if digest in self._spooled:
            return (self._folder() / digest).read_bytes()
        if digest in self._sizes and self._store is not None:
            return self._store.get_blob(digest)  # verified against its address
        raise KeyError(digest)

    def chunks(self, digest: str) -> Iterator[bytes]:
        """The blob's bytes in pieces (a spooled one never whole)."""
        if digest not in self._spooled:
            yield self[digest]
            return
        with open(self._folder() / digest, "rb") as source:
            while block := source.read(CHUNK):
                yield block

    def size(self, digest: str) -> int:
        return self._sizes[digest]

    def __delitem__(self, digest: str) -> None:
        del self._sizes[digest]
        if digest in self._spooled:
            self._spooled.discard(digest)
            (self._folder() / digest).unlink(missing_ok=True)

    def __contains__(self, digest: object) -> bool:
        return digest in self._sizes

    def __iter__(self) -> Iterator[str]:
        return iter(self._sizes)

    def __len__(self) -> int:
        return len(self._sizes)

    def close(self) -> None:
        """Remove the spool folder (also done when the mapping is collected, or at exit); the
        names and sizes stay (what a report counts)."""
        if self._finalizer is not None:
            self._finalizer()
        self._dir, self._finalizer = None, None

    def setdefault(self, digest: str, data: bytes = b"") -> bytes:
        """``codec.put``'s way in: a blob already held is not read back (same name, same bytes)."""
        if digest not in self._sizes:
            self[digest] = data
        return data
