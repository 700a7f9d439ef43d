"""The writer of a recording proxy session: the episode rewritten (one transaction) after every
exchange, from one thread that owns its own store connection (SQLite connections belong to
their thread), so a proxy killed with SIGKILL keeps every exchange that completed."""

from __future__ import annotations

import queue
import threading
from typing import Callable

from replaykit.cassette.backend import StoreHandle
from replaykit.cassette.events import Episode, Event
from replaykit.cassette.keys import CassetteKey
from replaykit.core.meta import EpisodeMeta

KeyOf = Callable[[list[Event]], CassetteKey]


class SessionWriter:
    """Persists the session after every exchange, from one thread that owns its own
    store connection (SQLite connections belong to their thread). Writers waiting at
    the same time share one write of the newest tape."""

    def __init__(self, source: StoreHandle, key_of: KeyOf, meta: Callable[[], EpisodeMeta]) -> None:
        """``key_of`` keys the tape (a session's key names the model of its first call);
        ``meta`` is the episode's metadata as it stands when written."""
        self.source, self.key_of, self.meta = source, key_of, meta
        self.jobs: queue.Queue[tuple[list[Event], threading.Event] | None] = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="replaykit-proxy-writer", daemon=True)
        self.thread.start()

    def write(self, events: list[Event]) -> None:
        done = threading.Event()
        self.jobs.put((events, done))
        done.wait()

    def _run(self) -> None:
        store = self.source.reopen()
        written = 0
        try:
            while True:
                job = self.jobs.get()
                if job is None:
                    return
                batch = [job]
                while True:  # coalesce: the newest tape covers every waiting writer
                    try:
                        nxt = self.jobs.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        self.jobs.put(None)
                        break
                    batch.append(nxt)
                newest = max((events for events, _ in batch), key=len)
                if len(newest) > written:  # tapes only grow: a shorter one is already stored
                    try:
                        store.put_episode(Episode(key=self.key_of(newest), events=newest, meta=self.meta()))
                        written = len(newest)
                    except BaseException as exc:  # reported by the session; the final write retries
                        self.error = exc
                for _, done in batch:
                    done.set()
        finally:
            store.close()

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=30)
