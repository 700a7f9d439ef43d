"""An action's output, the same for every environment: each stream is decoded UTF-8
(``errors="replace"``) and cut at ``max_output_bytes``, followed by a fixed truncation
marker (no counts, so it stays deterministic); a timed-out action exits with
:data:`TIMEOUT_EXIT_CODE` (124, as ``timeout(1)`` reports it)."""

from __future__ import annotations

import os
import threading
from typing import IO

TIMEOUT_EXIT_CODE = 124
_CHUNK = 65536


def truncation_marker(stream: str, limit: int) -> str:
    """The line appended to a stream cut at ``limit`` bytes (no counts: stays deterministic)."""
    return f"\n[replaykit: {stream} truncated at {limit} bytes]\n"


class CappedOutput:
    """Collects one output stream up to ``limit`` bytes; past that, notes the truncation."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.truncated = False

    def add(self, chunk: bytes | None) -> None:
        if not chunk:
            return
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]
        if len(chunk) > max(room, 0):
            self.truncated = True

    def text(self, stream: str) -> str:
        out = bytes(self.kept).decode("utf-8", errors="replace")
        return out + truncation_marker(stream, self.limit) if self.truncated else out


class CappedReader(threading.Thread):
    """Drains a pipe to its end into a :class:`CappedOutput`."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.output = CappedOutput(limit)

    def run(self) -> None:
        fd = self.pipe.fileno()
        try:
            while chunk := os.read(fd, _CHUNK):
                self.output.add(chunk)
        except OSError:
            pass

    def text(self, stream: str) -> str:
        return self.output.text(stream)
