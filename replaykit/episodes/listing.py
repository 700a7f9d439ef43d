"""The cassette listing (``cassettes ls``): index rows, each with its episode's outcome held to
its events, read without decoding an episode or loading the event classes (``views.py`` shows
one cassette's events)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from replaykit.cassette.outcomes import stored_outcome
from replaykit.core.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from replaykit.cassette.backend import BrowseStore, RunStore

LS_COLUMNS = (
    "id",
    "task_id",
    "seed",
    "model",
    "harness_sha",
    "kind",
    "n_llm",
    "n_env",
    "reward",
    "passed",
    "digest",
    "created_at",
)


def list_cassettes(
    store: BrowseStore, run_id: str | None = None, limit: int | None = None
) -> list[dict[str, object]]:
    """Cassette rows, oldest first; with ``limit``, only the newest ``limit`` (a run's: its last).
    Each row's ``outcome`` is its episode's recorded class, held to its events (``cassette.outcomes``).
    A row that cannot be read (a run naming a cassette the store lacks, a damaged episode) is
    listed with ``outcome`` ``damaged`` and ``damaged``: what is wrong, as ``cassettes verify`` says."""
    if limit is not None and limit < 0:
        raise ConfigError(f"--limit must be 0 or more, not {limit}")
    if run_id:
        ids = store.get_run(run_id).cassettes
        docs: dict[str, bytes] = {}
        if limit is not None:
            ids = ids[len(ids) - limit :] if limit else []
        listed = [_row(store, i) for i in ids]
    else:
        summaries: list[Mapping[str, object]] = list(store.cassette_summaries(limit))
        listed = [{c: r[c] for c in LS_COLUMNS} for r in summaries]
        docs = _documents(store, summaries)
    for row in listed:
        if "damaged" in row:
            continue
        try:
            row["outcome"] = _outcome(store, row, docs.get(str(row["id"])))
        except StoreError as exc:
            row.update(outcome="damaged", damaged=damage_line(exc))
    return listed


def damage_line(exc: StoreError) -> str:
    """What a listing says of a row it cannot read (``cassettes verify``'s words, no store path):
    ``no cassette '9c28…'``, or what is corrupt."""
    return str(exc).split(" in store ")[0].removeprefix("store corrupt: ")


def _row(store: RunStore, cassette_id: str) -> dict[str, object]:
    try:
        row: Mapping[str, object] = store.cassette_row(cassette_id)
    except StoreError as exc:
        blank: dict[str, object] = dict.fromkeys(LS_COLUMNS)
        return {**blank, "id": cassette_id, "outcome": "damaged", "damaged": damage_line(exc)}
    return {c: row[c] for c in LS_COLUMNS}


def _documents(store: RunStore, rows: list[Mapping[str, object]]) -> dict[str, bytes]:
    """The listed episodes' documents, each verified, read together (a few queries, not one a
    row); none where one cannot be read: then each row reads its own and only it is damaged."""
    wanted = {str(r["id"]): str(r["doc"]) for r in rows if r.get("kind") in (None, "", "episode")}
    try:
        blobs = store.get_blobs(wanted.values())
    except StoreError:
        return {}
    return {cid: blobs[doc] for cid, doc in wanted.items()}


def _outcome(store: RunStore, row: Mapping[str, object], doc: bytes | None = None) -> str:
    """A listed cassette's outcome (a proxy session or a proposal has none: its kind)."""
    if row.get("kind") not in (None, "", "episode"):
        return "-"
    return stored_outcome(store, str(row["id"]), doc).outcome


def count_cassettes(store: BrowseStore, run_id: str | None = None) -> int:
    return len(store.get_run(run_id).cassettes) if run_id else store.count_cassettes()
