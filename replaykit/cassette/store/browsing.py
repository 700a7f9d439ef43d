"""Named read queries the viewer (``replaykit view``) asks: a filtered, sorted page of
episodes with its total, the values the filters offer, documents of one kind without
their bodies, and a change token for polling. Reads only; nothing here writes."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, TypedDict

from replaykit.cassette.store.blobs import BlobsMixin
from replaykit.cassette.store.schema import RunsRow, as_rows

#: Columns an episode page can be sorted by (the index columns of ``cassettes``).
EPISODE_SORTS = (
    "created_at",
    "task_id",
    "seed",
    "model",
    "harness_sha",
    "reward",
    "passed",
    "infra_failure",
    "n_env",
    "n_llm",
    "tokens",
)
#: What an episode row holds: its id and kind, the sortable columns, the time last.
_COLUMNS = ("id", "kind", *EPISODE_SORTS[1:], EPISODE_SORTS[0])
OUTCOMES = ("pass", "fail", "infra")


class EpisodeFilters(TypedDict, total=False):
    """What an episode page is filtered by (absent, empty or None: not filtered)."""

    kind: str  # default ``episode``
    task_id: str
    seed: int | str | None  # a form's text is accepted
    model: str
    harness_sha: str  # a prefix
    outcome: str | None  # pass | fail | infra; anything else: not filtered
    ids: Collection[str] | None  # only these cassettes


class EpisodeFacets(TypedDict):
    """The values an episode page's filters offer: each column's distinct values, sorted."""

    task_id: list[str]
    seed: list[int]
    model: list[str]
    harness_sha: list[str]


class EpisodeListing(TypedDict):
    """An episode row of a page: its id and kind, the sortable columns, the time last."""

    id: str
    kind: str
    task_id: str
    seed: int
    model: str
    harness_sha: str
    reward: float | None
    passed: int | None
    infra_failure: int | None
    n_env: int
    n_llm: int
    tokens: int
    created_at: str


class BrowsingMixin(BlobsMixin):
    """Listings for a browser: one page at a time, never a whole table of documents."""

    def episode_page(
        self,
        filters: EpisodeFilters | None = None,
        sort: str = "created_at",
        descending: bool = True,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[EpisodeListing], int]:
        """Index rows of episodes matching ``filters`` (``kind`` (default ``episode``), ``task_id``,
        ``seed``, ``model``, ``harness_sha`` (a prefix), ``outcome`` (pass|fail|infra), ``ids``),
        sorted by one of :data:`EPISODE_SORTS`, one page of them, and how many match."""
        if sort not in EPISODE_SORTS:
            raise ValueError(f"cannot sort episodes by {sort!r}; one of {', '.join(EPISODE_SORTS)}")
        f: EpisodeFilters = filters or {}
        where: list[str] = ["kind = ?"]
        args: list[str | int] = [f.get("kind") or "episode"]
        for column, value in (("task_id", f.get("task_id")), ("model", f.get("model"))):
            if value:
                where.append(f"[{column}] = ?")
                args.append(str(value))
        seed = f.get("seed")
        if seed is not None and seed != "":
            where.append("seed = ?")
            args.append(int(seed))
        if f.get("harness_sha"):
            where.append("harness_sha LIKE ?")
            args.append(str(f["harness_sha"]).replace("%", "").replace("_", "") + "%")
        outcome = f.get("outcome")
        if outcome == "pass":
            where.append("passed = 1 AND infra_failure = 0")
        elif outcome == "fail":
            where.append("passed = 0 AND infra_failure = 0")
        elif outcome == "infra":
            where.append("infra_failure = 1")
        if (wanted := f.get("ids")) is not None:
            ids = list(wanted) or [""]
            where.append(f"id IN ({','.join('?' * len(ids))})")
            args.extend(ids)
        clause = " AND ".join(where)
        total = int(
            self.db.conn.execute(f"SELECT COUNT(*) FROM cassettes WHERE {clause}", args).fetchone()[0]
        )
        order = "DESC" if descending else "ASC"
        cols = ", ".join(f"[{c}]" for c in _COLUMNS)
        rows = self.db.conn.execute(
            f"SELECT {cols} FROM cassettes WHERE {clause} ORDER BY [{sort}] {order}, id {order} LIMIT ? OFFSET ?",
            [*args, int(limit), int(offset)],
        ).fetchall()
        return as_rows(EpisodeListing, _COLUMNS, rows), total

    def episode_facets(self, kind: str = "episode") -> EpisodeFacets:
        """The distinct tasks, seeds, models and harness SHAs of the stored episodes (for filters)."""
        return {
            "task_id": self._distinct("task_id", kind),
            "seed": self._distinct("seed", kind),
            "model": self._distinct("model", kind),
            "harness_sha": self._distinct("harness_sha", kind),
        }

    def _distinct(
        self, column: str, kind: str
    ) -> list[Any]:  # the column's values, as the driver returns them
        rows = self.db.conn.execute(
            f"SELECT DISTINCT [{column}] FROM cassettes WHERE kind = ? ORDER BY [{column}]", (kind,)
        ).fetchall()
        return [r[0] for r in rows]

    def doc_rows(self, kind: str) -> list[RunsRow]:
        """The ``runs``-table rows of one kind (documents not read), newest first."""
        cursor = self.db.conn.execute(
            "SELECT id, kind, name, harness_sha, model, endpoint, config_digest, doc, created_at "
            "FROM runs WHERE kind = ? ORDER BY created_at DESC, id DESC",
            (kind,),
        )
        cols = [c[0] for c in cursor.description]
        return as_rows(RunsRow, cols, cursor.fetchall())

    def change_token(self) -> str:
        """A value that changes whenever another process commits to the store (for polling)."""
        version = self.db.conn.execute("PRAGMA data_version").fetchone()[0]
        counts = self.db.conn.execute(
            "SELECT (SELECT COUNT(*) FROM cassettes), (SELECT COUNT(*) FROM runs)"
        ).fetchone()
        return f"{version}-{counts[0]}-{counts[1]}"
