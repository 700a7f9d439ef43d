"""Full-text search over transcripts and observations: what text an episode contributes,
and keeping the FTS5 sidecar (:class:`~replaykit.cassette.store.search.SearchIndex`)
in step with the store, lazily (on the first search, then only new or changed episodes).

The sidecar lives under ``$XDG_CACHE_HOME/replaykit/view/`` (default ``~/.cache``), one
file per store path, never inside the store: the store stays byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from replaykit.cassette.backend import BrowseStore
from replaykit.cassette.events import Episode
from replaykit.cassette.store.search import SearchHit, SearchIndex
from replaykit.cassette.stores import is_url
from replaykit.report.transcript import transcript

#: Episodes decoded and written per transaction while the index is built.
BATCH = 200


def index_path(store_root: Path | str) -> Path:
    """Where the sidecar of the store at ``store_root`` (a folder or a backend URL) lives."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    where = str(store_root) if is_url(store_root) else str(Path(store_root).resolve())
    key = hashlib.sha256(where.encode("utf-8")).hexdigest()[:16]
    return cache / "replaykit" / "view" / f"search-{key}.db"


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
    """The sidecar of one store, refreshed before every search.

    ``search(q)`` brings the index up to date first. ``search(q, wait=S)`` (the viewer)
    does that in a background thread with its own store connection and answers after at
    most ``S`` seconds with what is indexed so far; :attr:`pending` says how many episodes
    are not searchable yet (the first search of a 10,000-episode store takes a while; the
    viewer stays responsive meanwhile)."""

    def __init__(self, store: BrowseStore, path: Path | None = None) -> None:
        self.store = store
        self.path = path or index_path(store.location)
        self.index = SearchIndex(self.path)
        self.pending = 0
        self.error = ""
        self._worker: threading.Thread | None = None

    def refresh(self) -> int:
        """Index the episodes stored since the last refresh; how many were added."""
        return self._fill(self.store, self.index)

    def _fill(self, store: BrowseStore, index: SearchIndex) -> int:
        rows = store.cassette_summaries()
        info = {r["id"]: r for r in rows}
        todo = index.sync({r["id"]: r["doc"] for r in rows})
        self.pending = len(todo)
        for i in range(0, len(todo), BATCH):
            batch = []
            for cid in todo[i : i + BATCH]:
                r = info[cid]
                text = episode_text(store.get_episode(cid))
                batch.append((cid, r["doc"], r["task_id"], r["seed"], r["model"], text))
            index.add(batch)
            self.pending -= len(batch)
        return len(todo)

    def _refresh_in_background(self) -> threading.Thread:
        if self._worker is not None and self._worker.is_alive():
            return self._worker

        def work() -> None:
            store, index = self.store.reopen(readonly=True), SearchIndex(self.path)
            try:
                self._fill(store, index)
                self.error = ""
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
            self._refresh_in_background().join(timeout=wait)
        return self.index.search(query, limit=limit, offset=offset)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.join(timeout=30)
        self.index.close()
