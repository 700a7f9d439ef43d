"""Named read queries the viewer (``replaykit view``) asks: a filtered, sorted page of
episodes with its total, the values the filters offer, documents of one kind without
their bodies, and a change token for polling. Reads only; nothing here writes."""

from __future__ import annotations

from collections.abc import Collection
from typing import TypedDict, cast

from replaykit.cassette.store.blobs import BlobsMixin
from replaykit.cassette.store.driver import AnyOf, Match, Prefix, Where
from replaykit.cassette.store.schema import RunsRow, typed_rows

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
#: what an episode page filters its grade by (the outcome classes themselves: ``cassette.outcomes.OUTCOMES``)
GRADE_FILTERS = ("pass", "fail", "infra")
#: the columns an episode page's filters offer values of, and how many values each offers at most
#: (the first ones, ascending: a page stays the same size however many seeds or SHAs a store holds)
FACETS = ("task_id", "seed", "model", "harness_sha")
FACET_LIMIT = 100


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


def episode_where(f: EpisodeFilters) -> Where:
    """The rows an episode page's filters select (absent, empty or None: not filtered)."""
    where: dict[str, Match] = {"kind": f.get("kind") or "episode"}
    for column in ("task_id", "model"):
        if value := f.get(column):
            where[column] = str(value)
    seed = f.get("seed")
    if seed is not None and seed != "":
        where["seed"] = int(seed)
    if sha := f.get("harness_sha"):
        where["harness_sha"] = Prefix(str(sha))
    outcome = f.get("outcome")
    if outcome in ("pass", "fail"):
        where.update(passed=int(outcome == "pass"), infra_failure=0)
    elif outcome == "infra":
        where["infra_failure"] = 1
    if (wanted := f.get("ids")) is not None:
        where["id"] = AnyOf(tuple(wanted))
    return where


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
        match = episode_where(filters or {})
        key = ("count", *sorted(match.items(), key=lambda item: item[0]))
        total = self._per_change(key, lambda: self.driver.count("cassettes", match))
        rows = self.driver.select(
            "cassettes",
            _COLUMNS,
            match,
            [(sort, descending), ("id", descending)],
            limit=int(limit),
            offset=int(offset),
        )
        return typed_rows(EpisodeListing, rows), total

    def episode_facets(self, kind: str = "episode", limit: int = FACET_LIMIT) -> EpisodeFacets:
        """The distinct tasks, seeds, models and harness SHAs of the stored episodes (for filters):
        the first ``limit`` of each, ascending; computed again only after a change to the store."""

        def facets() -> EpisodeFacets:
            found = {c: self.driver.distinct("cassettes", c, {"kind": kind}, limit) for c in FACETS}
            return cast(EpisodeFacets, found)  # each column's values, as the driver returns them

        cached = self._per_change(("facets", kind, limit), facets)
        return cast(EpisodeFacets, {c: list(cast(list[object], v)) for c, v in cached.items()})  # own lists

    def doc_rows(self, kind: str) -> list[RunsRow]:
        """The ``runs``-table rows of one kind (documents not read), newest first."""
        rows = self.driver.select("runs", where={"kind": kind}, order=[("created_at", True), ("id", True)])
        return typed_rows(RunsRow, rows)

    def change_token(self) -> str:
        """A value that changes whenever anyone commits to the store (for polling and caches)."""
        return self.driver.version()
