"""Full-text search over transcripts and observations: what text an episode contributes,
and keeping the FTS5 sidecar (:class:`~replaykit.cassette.store.search.SearchIndex`)
in step with the store, lazily (on the first search, then only new or changed episodes).

The sidecar lives under ``$XDG_CACHE_HOME/replaykit/view/`` (default ``~/.cache``), one
file per store path, never inside the store: the store stays byte-identical.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.stores import is_url
from replaykit.cassette.events import Episode
from replaykit.cassette.store.search import SearchIndex
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
    """The sidecar of one store, refreshed before every search."""

    def __init__(self, store: StoreBackend, path: Path | None = None) -> None:
        self.store = store
        self.index = SearchIndex(path or index_path(store.location))

    def refresh(self) -> int:
        """Index the episodes stored since the last refresh; how many were added."""
        rows = self.store.cassette_summaries(("id", "doc", "task_id", "seed", "model"))
        info = {r["id"]: r for r in rows}
        todo = self.index.sync({r["id"]: r["doc"] for r in rows})
        for i in range(0, len(todo), BATCH):
            batch = []
            for cid in todo[i : i + BATCH]:
                r = info[cid]
                text = episode_text(self.store.get_episode(cid))
                batch.append((cid, r["doc"], r["task_id"], r["seed"], r["model"], text))
            self.index.add(batch)
        return len(todo)

    def search(self, query: str, limit: int = 20, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        self.refresh()
        return self.index.search(query, limit=limit, offset=offset)

    def close(self) -> None:
        self.index.close()
