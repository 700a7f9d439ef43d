"""Writing a file the user asked for: atomically (whole or not at all) and with the
permissions any other file they create gets (``0666 & ~umask``: 0644 under the usual
umask), not ``mkstemp``'s private 0600."""

from __future__ import annotations

import contextlib
import os
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
