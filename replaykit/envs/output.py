"""An action's output, the same for every environment: each stream is decoded UTF-8
(``errors="replace"``) and cut at ``max_output_bytes``, followed by a fixed truncation
marker (no counts, so it stays deterministic); a timed-out action exits with
:data:`TIMEOUT_EXIT_CODE` (124, as ``timeout(1)`` reports it).

An action whose own process ended while a process it started in the background still holds
its output (a server, as in Harbor, kept until the verifier has run) is not waited for: what
reached the stream until it went quiet (:func:`settle_output`, at most ``SETTLE_MAX_SEC``) is
its output; what the background process writes later is read and dropped (``freeze``), so it
never blocks on a full pipe and never becomes part of an observation.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
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
        self.frozen = False
        self.last = time.monotonic()  # when a chunk last arrived

    def freeze(self) -> None:
        """What arrives from now on is dropped (a background process's later output)."""
        self.frozen = True

    def add(self, chunk: bytes | None) -> None:
        if not chunk or self.frozen:
            return
        self.last = time.monotonic()
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
        self.detached = False

    def run(self) -> None:
        fd = self.pipe.fileno()
        try:
            while chunk := os.read(fd, _CHUNK):
                self.output.add(chunk)
        except OSError:
            pass
        if self.detached:  # nobody waits for it any more: it closes its own end
            self.pipe.close()

    def detach(self) -> None:
        """Stop collecting; read on (dropping) until the background holders end, then close."""
        self.output.freeze()
        self.detached = True

    def text(self, stream: str) -> str:
        return self.output.text(stream)


SETTLE_QUIET_SEC = 0.1
SETTLE_MAX_SEC = 1.0


def settle_output(
    outputs: Iterable[CappedOutput],
    done: Callable[[], bool],
    quiet_sec: float = SETTLE_QUIET_SEC,
    max_sec: float = SETTLE_MAX_SEC,
) -> bool:
    """After an action's own process ended: wait until ``done()`` (the streams closed) or no
    output arrived for ``quiet_sec`` (at most ``max_sec``); True when the streams closed."""
    outputs = list(outputs)
    ended = time.monotonic()
    deadline = ended + max_sec
    while not done():
        now = time.monotonic()
        quiet = now - max([ended, *(o.last for o in outputs)])
        if quiet >= quiet_sec or now >= deadline:
            return False
        time.sleep(0.01)
    return True
