"""Full-text search over transcripts and observations: what text an episode contributes,
and keeping the FTS5 sidecar (:class:`~replaykit.cassette.store.search.SearchIndex`)
in step with the store, lazily (on the first search, then only what changed: nothing is
listed while the store's change token is the one the index caught up with).

The sidecar lives under ``$XDG_CACHE_HOME/replaykit/view/`` (default ``~/.cache``), one
file per store path, never inside the store: the store stays byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

from replaykit.cassette.backend import BrowseStore
from replaykit.cassette.events import Episode
from replaykit.cassette.facets import facet_counts
from replaykit.cassette.store.schema import CassetteRow
from replaykit.cassette.store.search import SearchHit, SearchIndex
from replaykit.cassette.stores import is_url
from replaykit.report.transcript import transcript

#: Episodes decoded and written per transaction while the index is built.
BATCH = 200
#: Index rows read per look at what is newer than the index (newest first).
PAGE = 1000


def index_path(store_root: Path | str) -> Path:
    """Where the sidecar of the store at ``store_root`` (a folder or a backend URL) lives."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    where = str(store_root) if is_url(store_root) else str(Path(store_root).resolve())
    key = hashlib.sha256(where.encode("utf-8")).hexdigest()[:16]
    # v2: the sidecar holds each episode's call facets too (an older one is left unread)
    return cache / "replaykit" / "view" / f"search-v2-{key}.db"


def episode_text(episode: Episode) -> str:
    """Everything a reader might look for: messages, tool calls and outputs, actions,
    stdout/stderr, errors and the grade's detail."""
    parts: list[str] = []
    for turn in transcript(episode):
        if turn["kind"] == "call":
            for m in turn["new"] + turn["reply"]:
                parts.append(m.get("content") or "")
                parts.extend(f"{c['name']} {c['arguments']}" for c in m.get("tool_calls") or [])
        elif turn["kind"] == "env":
            parts += [turn["action"], turn["stdout"] or "", turn["stderr"] or ""]
        elif turn["kind"] == "error":
            parts.append(turn["message"])
        elif turn["kind"] == "grade":
            parts.append(str(turn.get("detail") or ""))
    return "\n".join(p for p in parts if p)


class Searcher:
    """The sidecar of one store, brought up to date before a search when the store changed.

    The index keeps how far it has read the store (the newest cassette it indexed, by time
    then id); a search first compares the store's change token with the one the index last
    caught up with: equal, nothing is listed. Otherwise it reads the cassettes newer than that
    mark, newest first, page by page, and indexes those it lacks (or holds from another
    document); if the index then counts other than the store (a cassette removed, or one
    stored under an older time), it compares every id once. ``search(q, wait=S)`` (the
    viewer) does that in a background thread with its own store connection and answers after
    at most ``S`` seconds with what is indexed so far: :attr:`pending` episodes are not
    searchable yet, :attr:`indexed` are, of :attr:`total` (the first search of a
    100,000-episode store reads every episode once; the viewer stays responsive meanwhile).
    ``progress(indexed, total)`` is told after each batch."""

    def __init__(
        self,
        store: BrowseStore,
        path: Path | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.store = store
        self.path = path or index_path(store.location)
        self.index = SearchIndex(self.path)
        self.pending = 0
        self.total = 0
        self.error = ""
        self.progress = progress
        self._synced: str | None = None  # the store's change token the index last caught up with
        self._worker: threading.Thread | None = None

    @property
    def indexed(self) -> int:
        return self.total - self.pending

    def refresh(self) -> int:
        """Index what the store holds that the index lacks; how many episodes were indexed."""
        token = self.store.change_token()
        if token == self._synced:
            return 0
        added = self._fill(self.store, self.index)
        self._synced = token
        return added

    def _fill(self, store: BrowseStore, index: SearchIndex) -> int:
        todo, rows = self._changed(store, index)
        added = self._index(store, index, todo, rows)
        if index.count() != store.count_cassettes():  # a removal, or a row stored under an older time
            every = store.cassette_summaries()
            todo = index.sync({r["id"]: r["doc"] for r in every})
            added += self._index(store, index, todo, {r["id"]: r for r in every})
        return added

    def _changed(self, store: BrowseStore, index: SearchIndex) -> tuple[list[str], dict[str, CassetteRow]]:
        """The ids to index (oldest first) and their index rows: everything at first, then what
        is newer than the index's mark."""
        mark = tuple(json.loads(index.mark() or "[]"))
        if not mark:
            every = store.cassette_summaries()
            self.total = len(every)
            return index.sync({r["id"]: r["doc"] for r in every}), {r["id"]: r for r in every}
        newer: list[CassetteRow] = []
        while True:
            page = store.newest_cassettes(PAGE, offset=len(newer))
            # the mark's own second too: times are to the second, and a row stored in that
            # second may sort before the mark by id (those already indexed are not stale)
            fresh = [r for r in page if r["created_at"] >= mark[0]]
            newer += fresh
            if len(fresh) < PAGE:
                break
        newer.reverse()
        todo = index.stale({r["id"]: r["doc"] for r in newer})
        self.total = index.count() + len(todo)
        return todo, {r["id"]: r for r in newer}

    def _index(
        self, store: BrowseStore, index: SearchIndex, todo: list[str], info: dict[str, CassetteRow]
    ) -> int:
        """Index ``todo`` oldest first, keeping the mark after each batch (an interrupted build
        resumes where it stopped)."""
        self.pending = len(todo)
        for i in range(0, len(todo), BATCH):
            batch, facets = [], []
            for cid in todo[i : i + BATCH]:
                r, episode = info[cid], store.get_episode(cid)
                batch.append((cid, r["doc"], r["task_id"], r["seed"], r["model"], episode_text(episode)))
                facets.append((cid, facet_counts(episode.events)))
            index.add_facets(facets)
            index.add(batch)
            last = info[todo[min(i + BATCH, len(todo)) - 1]]
            mark = [last["created_at"], last["id"]]
            if mark > json.loads(index.mark() or "[]"):  # never back (the full compare's rows)
                index.set_mark(json.dumps(mark))
            self.pending -= len(batch)
            if self.progress is not None:
                self.progress(self.indexed, self.total)
        return len(todo)

    def _refresh_in_background(self) -> threading.Thread | None:
        if self._worker is not None and self._worker.is_alive():
            return self._worker
        token = self.store.change_token()  # this connection's: tokens of two connections differ
        if token == self._synced:
            return None  # nothing committed since the index caught up: no listing, no thread

        def work() -> None:
            store, index = self.store.reopen(readonly=True), SearchIndex(self.path)
            try:
                self._fill(store, index)
                self.error = ""
                self._synced = token
            except Exception as exc:  # one line on the search page, never a dead thread's traceback
                self.error = f"{type(exc).__name__}: {exc}"
            finally:
                store.close()
                index.close()

        self._worker = threading.Thread(target=work, name="replaykit-view-index", daemon=True)
        self._worker.start()
        return self._worker

    def search(
        self, query: str, limit: int = 20, offset: int = 0, wait: float | None = None
    ) -> tuple[list[SearchHit], int]:
        if wait is None:
            self.refresh()
        else:
            worker = self._refresh_in_background()
            if worker is not None:
                worker.join(timeout=wait)
        return self.index.search(query, limit=limit, offset=offset)

    def with_facet(self, facet: str, wait: float) -> list[str]:
        """The episodes with a call of ``facet`` (``cassette/facets.py``), the sidecar brought up
        to date first as a search does (at most ``wait`` seconds: :attr:`pending` are not yet)."""
        worker = self._refresh_in_background()
        if worker is not None:
            worker.join(timeout=wait)
        return self.index.with_facet(facet)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.join(timeout=30)
        self.index.close()
