"""Total per-call deadlines, all kept by one thread per process.

A recorded call arms its deadline (``arm``) before reading the body and cancels it
after (``cancel``); when a deadline passes first, its action runs (the stub shuts the
response's socket, so a trickling body cannot hang the caller). One sleeping thread
and a heap instead of a ``threading.Timer`` per call: a timer starts a thread, which
cost more than everything else the recorder does for a call. A forked worker starts
its own thread (threads do not survive ``fork``).

The thread is woken only when a deadline earlier than the one it sleeps until is armed:
cancelled entries stay in the heap (dropped in bulk by ``cancel``) and the thread sleeps
until the earliest of them, so arming the usual 120 s deadline costs no thread switch.
Waking the thread per call (to drop the entry just cancelled) cost ~60 µs of CPU a call.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import threading
import time
from collections.abc import Callable


class Entry:
    """An armed deadline; its action is None once cancelled or run."""

    __slots__ = ("action",)

    def __init__(self, action: Callable[[], None]) -> None:
        self.action: Callable[[], None] | None = action


class Deadlines:
    def __init__(self) -> None:
        self._pid = -1
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Entry]] = []
        self._order = itertools.count()
        self._live = 0
        self._thread: threading.Thread | None = None
        #: when the thread wakes by itself (inf: only when notified; -inf: it is awake)
        self._wake = -math.inf

    def arm(self, at: float, action: Callable[[], None]) -> Entry:
        """Run ``action`` at monotonic time ``at`` unless cancelled before."""
        if self._pid != os.getpid():
            self._reset()
        entry = Entry(action)
        with self._cond:
            heapq.heappush(self._heap, (at, next(self._order), entry))
            self._live += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="replaykit-deadlines", daemon=True)
                self._thread.start()
            elif at < self._wake:
                self._cond.notify()
        return entry

    def cancel(self, entry: Entry) -> None:
        with self._cond:
            if entry.action is not None:
                entry.action = None
                self._live -= 1
            if len(self._heap) > 64 and len(self._heap) > 4 * self._live:  # drop the cancelled
                self._heap = [item for item in self._heap if item[2].action is not None]
                heapq.heapify(self._heap)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due: list[Callable[[], None]] = []
                while self._heap and self._heap[0][0] <= now:
                    _, _, entry = heapq.heappop(self._heap)
                    if entry.action is not None:
                        due.append(entry.action)
                        entry.action = None
                        self._live -= 1
                if not due:
                    self._wake = self._heap[0][0] if self._heap else math.inf
                    self._cond.wait(None if math.isinf(self._wake) else self._wake - now)
                    self._wake = -math.inf
                    continue
            for action in due:
                action()


DEADLINES = Deadlines()
