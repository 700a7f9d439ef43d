"""The viewer's full-text index: an SQLite FTS5 file of its own, beside the store (never
inside ``index.db``), rebuilt incrementally from the episodes it is told about.

    index = SearchIndex(path)
    index.sync(current)            # cassette id -> doc hash now in the store; returns ids to (re)index
    index.stale(changed)           # the same for some of them (what changed): forgets only those
    index.add([(cid, task, seed, model, text)])
    index.add_facets([(cid, {"length": 2})])   # an episode's call facets (``cassette/facets.py``)
    index.with_facet("length")     # the ids of the episodes with at least one such call
    index.set_mark(mark)           # how far the store has been read (``mark()`` reads it back)
    hits, total = index.search("needle", limit=20)

Lives in the store package because the store is the only package that speaks SQL; what
text goes in is the viewer's business (``replaykit/view/search.py``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TypedDict

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS indexed (id TEXT PRIMARY KEY, doc TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS state (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    (
        "CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5("
        "id UNINDEXED, task_id UNINDEXED, seed UNINDEXED, model UNINDEXED, body, tokenize='unicode61')"
    ),
    (
        "CREATE TABLE IF NOT EXISTS facets (id TEXT NOT NULL, facet TEXT NOT NULL, n INTEGER NOT NULL, "
        "PRIMARY KEY (id, facet))"
    ),
)


class SearchHit(TypedDict):
    """An episode whose text matched, with a snippet of the match."""

    cassette_id: str
    task_id: str
    seed: int
    model: str
    snippet: str


class SearchIndex:
    """An FTS5 table of episode texts plus which document each was built from."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.path), timeout=30, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        for sql in _SCHEMA:
            self.conn.execute(sql)

    def close(self) -> None:
        self.conn.close()

    def sync(self, current: dict[str, str]) -> list[str]:
        """Forget episodes gone from the store or re-recorded; the ids still to index."""
        have = dict(self.conn.execute("SELECT id, doc FROM indexed").fetchall())
        stale = [cid for cid, doc in have.items() if current.get(cid) != doc]
        with self.conn:
            self.conn.execute("BEGIN")
            for cid in stale:
                self.conn.execute("DELETE FROM texts WHERE id = ?", (cid,))
                self.conn.execute("DELETE FROM indexed WHERE id = ?", (cid,))
                self.conn.execute("DELETE FROM facets WHERE id = ?", (cid,))
        kept = {cid for cid in have if cid not in stale}
        return [cid for cid in current if cid not in kept]

    def stale(self, changed: dict[str, str]) -> list[str]:
        """Of ``changed`` (cassette id -> doc hash now in the store): forget those indexed from
        another document; the ids still to index."""
        ids = list(changed)
        have: dict[str, str] = {}
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            marks = ",".join("?" * len(part))
            have.update(
                self.conn.execute(f"SELECT id, doc FROM indexed WHERE id IN ({marks})", part).fetchall()
            )
        gone = [cid for cid, doc in have.items() if changed[cid] != doc]
        with self.conn:
            self.conn.execute("BEGIN")
            for cid in gone:
                self.conn.execute("DELETE FROM texts WHERE id = ?", (cid,))
                self.conn.execute("DELETE FROM indexed WHERE id = ?", (cid,))
                self.conn.execute("DELETE FROM facets WHERE id = ?", (cid,))
        return [cid for cid in ids if have.get(cid) != changed[cid]]

    def count(self) -> int:
        """How many episodes are indexed."""
        return int(self.conn.execute("SELECT COUNT(*) FROM indexed").fetchone()[0])

    def mark(self) -> str:
        """How far the store has been read (what :meth:`set_mark` last kept; "" at first)."""
        row = self.conn.execute("SELECT value FROM state WHERE name = 'mark'").fetchone()
        return str(row[0]) if row else ""

    def set_mark(self, mark: str) -> None:
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO state(name, value) VALUES ('mark', ?)", (mark,))

    def add(self, rows: list[tuple[str, str, str, int, str, str]]) -> None:
        """``(cassette id, doc hash, task id, seed, model, text)`` rows, in one transaction."""
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.executemany(
                "INSERT INTO texts(id, task_id, seed, model, body) VALUES (?, ?, ?, ?, ?)",
                [(cid, task, seed, model, text) for cid, _, task, seed, model, text in rows],
            )
            self.conn.executemany(
                "INSERT OR REPLACE INTO indexed(id, doc) VALUES (?, ?)", [(r[0], r[1]) for r in rows]
            )

    def add_facets(self, rows: list[tuple[str, dict[str, int]]]) -> None:
        """``(cassette id, {facet: calls})`` rows (derived from the episode), in one transaction."""
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.executemany(
                "INSERT OR REPLACE INTO facets(id, facet, n) VALUES (?, ?, ?)",
                [(cid, facet, n) for cid, counts in rows for facet, n in counts.items()],
            )

    def with_facet(self, facet: str) -> list[str]:
        """The ids of the indexed episodes with at least one call of ``facet``."""
        rows = self.conn.execute("SELECT id FROM facets WHERE facet = ? AND n > 0 ORDER BY id", (facet,))
        return [r[0] for r in rows.fetchall()]

    def search(self, query: str, limit: int = 20, offset: int = 0) -> tuple[list[SearchHit], int]:
        """Episodes whose text matches ``query`` (every word, as typed), best first, with a snippet
        (matches between ``\\x02`` and ``\\x03``); and how many match."""
        match = " ".join('"' + word.replace('"', '""') + '"' for word in query.split())
        if not match:
            return [], 0
        total = int(
            self.conn.execute("SELECT COUNT(*) FROM texts WHERE texts MATCH ?", (match,)).fetchone()[0]
        )
        rows = self.conn.execute(
            "SELECT id, task_id, seed, model, snippet(texts, 4, char(2), char(3), '…', 24) "
            "FROM texts WHERE texts MATCH ? ORDER BY rank LIMIT ? OFFSET ?",
            (match, int(limit), int(offset)),
        ).fetchall()
        hits = [
            SearchHit(cassette_id=cid, task_id=task, seed=seed, model=model, snippet=snippet)
            for cid, task, seed, model, snippet in rows
        ]
        return hits, total
