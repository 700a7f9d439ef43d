"""Listings that stay fast (issue 30 item 10), on every backend: an episode read is one round
trip where the driver can (PostgreSQL: one query), a column's distinct values come from its
index a value at a time (the first ``limit`` of them), and the viewer's facets and counts are
kept until the store changes — anyone's commit, seen through the change token."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from replaykit.cassette.events import Episode
from replaykit.cassette.store import Store
from replaykit.cassette.store.driver import DocumentReads
from replaykit.cassette.stores import open_store
from tests.cassette.test_store import make_episode
from tests.store_sql import raw_sql

pytestmark = pytest.mark.unit


def episode(seed: int, task: str = "task", history: int = 3) -> Episode:
    source = make_episode(history=history, seed=seed)
    return Episode(dataclasses.replace(source.key, task_id=task), source.events, source.meta)


def test_a_postgres_episode_read_is_one_query(store_location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(store_location)
    assert isinstance(store, Store)
    ep = make_episode(history=25)
    store.put_episode(ep)
    reader = store.reopen(readonly=True)
    assert reader.count_cassettes() == 1  # connected, the schema checked
    calls: list[str] = []
    for name in ("select", "count", "distinct", "read_document"):
        if hasattr(type(reader.driver), name):
            real = getattr(type(reader.driver), name)

            def counted(driver: Any, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
                calls.append(_name)
                return _real(driver, *args, **kwargs)

            monkeypatch.setattr(type(reader.driver), name, counted)
    assert reader.get_episode(ep.id) == ep
    if isinstance(reader.driver, DocumentReads):
        assert calls == ["read_document"]  # the row, its document and its 25 calls' blobs at once
    else:
        assert calls == ["select", "select", "select"]  # the row, its document, the blobs it names
    assert len(ep.llm_events) == 25


def test_distinct_values_come_in_order_first_n_null_first(store_location: str) -> None:
    store = open_store(store_location)
    assert isinstance(store, Store)
    with store.write_lock():
        for seed, task in ((3, "b"), (1, "a"), (2, "c"), (4, "a")):
            store.put_episode(episode(seed, task))
    driver = store.driver
    assert driver.distinct("cassettes", "task_id", {"kind": "episode"}) == ["a", "b", "c"]
    assert driver.distinct("cassettes", "task_id", {"kind": "episode"}, limit=2) == ["a", "b"]
    assert driver.distinct("cassettes", "seed", {"kind": "episode", "task_id": "a"}) == [1, 4]
    assert driver.distinct("cassettes", "task_id", {"kind": "proxy"}) == []
    store.put_doc("d" * 16, "note", {"x": 1})  # a runs row whose name column is empty
    assert driver.distinct("runs", "name") == [""]


def test_facets_are_capped_and_kept_until_anyone_writes(store_location: str) -> None:
    store = open_store(store_location)
    with store.write_lock():
        for seed in range(5):
            store.put_episode(episode(seed))
    viewer = store.reopen(readonly=True)
    assert viewer.episode_facets(limit=3)["seed"] == [0, 1, 2]  # the first ones, however many there are
    facets = viewer.episode_facets()
    assert facets["seed"] == [0, 1, 2, 3, 4] and facets["task_id"] == ["task"]
    token = viewer.change_token()
    assert viewer.change_token() == token  # reading moves nothing
    page, total = viewer.episode_page({}, limit=2)
    assert total == 5 and len(page) == 2
    store.put_episode(episode(9, "other"))  # another connection commits
    assert viewer.change_token() != token
    assert viewer.episode_facets()["task_id"] == ["other", "task"]  # computed again
    assert viewer.episode_page({}, limit=2)[1] == 6
    assert viewer.episode_page({"task_id": "other"})[1] == 1
    viewer.episode_facets()["task_id"].append("planted")  # a caller's list is its own
    assert viewer.episode_facets()["task_id"] == ["other", "task"]


def test_listings_use_their_index(tmp_path: Any) -> None:
    """SQLite plans the first page and ``cassettes ls`` as index walks, never a sort of the table."""
    store = Store(tmp_path / "store")
    store.put_episode(episode(0))
    conn = raw_sql(store)
    for sql in (
        "SELECT id FROM cassettes WHERE kind = 'episode' ORDER BY created_at DESC, id DESC LIMIT 50",
        "SELECT id FROM cassettes ORDER BY created_at DESC, id DESC LIMIT 100",
        "SELECT MIN(seed) FROM cassettes WHERE kind = 'episode' AND seed > 3",
    ):
        plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall())
        assert "USING" in plan and "INDEX" in plan and "TEMP B-TREE" not in plan, (sql, plan)


def test_the_viewer_offers_the_value_a_page_is_filtered_by_beyond_the_first_ones(tmp_path: Any) -> None:
    from replaykit.view import queries

    store = Store(tmp_path / "store")
    with store.write_lock():
        for seed in range(103):
            store.put_episode(episode(seed))
    page = queries.episodes(store, {"seed": 102}, "created_at", True, 1)
    assert page["total"] == 1 and page["episodes"][0]["seed"] == 102
    assert page["facets"]["seed"] == [*range(100), 102]  # the first 100, and the chosen one
    assert queries.episodes(store, {}, "created_at", True, 1)["facets"]["seed"] == list(range(100))
