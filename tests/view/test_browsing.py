"""The store's named read queries behind the viewer (store/browsing.py) and the search
sidecar (store/search.py): filters, sorting, pages, facets, the change token, incremental
indexing. In-process, over a small recorded panel."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.backend import BrowseStore
from replaykit.cassette.store import Store
from replaykit.cassette.stores import open_store
from replaykit.core.run_doc import RunDoc
from replaykit.episodes.run import measure
from replaykit.testing import small_config
from replaykit.view.pages import TrainingsPage
from replaykit.view.search import Searcher

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def recorded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A small panel recorded once per backend (a folder, or a fresh PostgreSQL database)."""
    tmp = tmp_path_factory.mktemp("browsing")
    with contextlib.ExitStack() as stack:
        if request.param == "postgresql":
            from tests.pg import fresh_database  # the server is checked first (conftest)

            where = {"store": stack.enter_context(fresh_database("browsing"))}
        else:
            where = {}
        config = small_config(tmp, tasks=["hello-file", "fix-config-port"], seeds=[0, 1, 2], **where)
        run = measure(config).run.to_json()  # the stored form
        yield {"tmp": tmp, "config": config, "run": run, "store": config.store_location}


def test_episode_pages_filter_sort_and_count(recorded: dict[str, Any]) -> None:
    store = open_store(recorded["store"], readonly=True)
    rows, total = store.episode_page({}, limit=4)
    assert total == 6 and len(rows) == 4
    rest, _ = store.episode_page({}, limit=4, offset=4)
    assert len(rest) == 2 and not {r["id"] for r in rows} & {r["id"] for r in rest}
    rows, total = store.episode_page({"task_id": "hello-file", "seed": 1})
    assert total == 1 and rows[0]["task_id"] == "hello-file" and rows[0]["seed"] == 1
    rows, _ = store.episode_page({}, sort="tokens", descending=False)
    assert [r["tokens"] for r in rows] == sorted(r["tokens"] for r in rows)
    passed, _ = store.episode_page({"outcome": "pass"})
    failed, _ = store.episode_page({"outcome": "fail"})
    assert len(passed) + len(failed) == 6 and all(r["passed"] for r in passed)
    assert not any(r["passed"] for r in failed)
    sha = recorded["run"]["harness_sha"]
    assert store.episode_page({"harness_sha": sha[:7]})[1] == 6
    assert store.episode_page({"harness_sha": "0000000"})[1] == 0
    some = [e["cassette_id"] for e in recorded["run"]["episodes"][:2]]
    assert {r["id"] for r in store.episode_page({"ids": some})[0]} == set(some)
    with pytest.raises(ValueError, match="cannot sort episodes by"):
        store.episode_page({}, sort="doc; DROP TABLE cassettes")
    facets = store.episode_facets()
    assert facets["task_id"] == ["fix-config-port", "hello-file"] and facets["seed"] == [0, 1, 2]
    assert [r["id"] for r in store.doc_rows("measure")] == [recorded["run"]["run_id"]]
    store.close()


def test_the_change_token_moves_when_another_process_writes(recorded: dict[str, Any]) -> None:
    reader = open_store(recorded["store"], readonly=True)
    before = reader.change_token()
    assert reader.change_token() == before  # reading changes nothing
    writer = open_store(recorded["store"])
    writer.put_doc("view-test-doc", "note", {"hello": "world"})
    writer.close()
    assert reader.change_token() != before
    reader.close()


def test_a_page_built_while_another_process_commits_carries_the_token_from_before(
    recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit landing between a page's queries and its rendering: the page must carry the token
    from before its queries, or the poll sees "no change" and the page never shows that commit
    (CI saw a live trainings page stop at epoch 4 of 5)."""
    import re

    from starlette.testclient import TestClient

    from replaykit.view import app as view_app
    from replaykit.view import trainings

    reader = open_store(recorded["store"], readonly=True)  # opened in the app's thread, on first use
    asked = trainings.trainings

    def trainings_then_a_commit(store: BrowseStore) -> TrainingsPage:
        page = asked(store)
        writer = open_store(recorded["store"])
        writer.put_doc("view-test-race", "note", {"landed": "mid-page"})
        writer.close()
        return page

    monkeypatch.setattr(trainings, "trainings", trainings_then_a_commit)
    with TestClient(view_app.create_app(reader), base_url="http://127.0.0.1") as client:  # one thread
        before = client.get("/api/token").json()["token"]
        html = client.get("/trainings").text
        shown = re.search(r'data-token="([^"]*)"', html)
        assert shown is not None, html[:400]
        now = client.get("/api/token").json()["token"]
    assert shown.group(1) == before != now  # so the next poll sees a change and fetches the page again


def test_the_search_index_is_built_once_then_kept_in_step(recorded: dict[str, Any], tmp_path: Path) -> None:
    store = open_store(recorded["store"], readonly=True)
    searcher = Searcher(store, tmp_path / "search.db")
    assert searcher.refresh() == 6 and searcher.refresh() == 0
    hits, total = searcher.search("hello")
    assert total >= 1 and all(h["cassette_id"] for h in hits)
    hits, total = searcher.search('"; DROP TABLE texts; --')  # words are quoted, never FTS syntax
    assert total == 0 and hits == []
    searcher.close()
    store.close()


def test_the_viewer_builds_the_index_in_the_background(recorded: dict[str, Any], tmp_path: Path) -> None:
    """``wait=0``: the search answers at once with what is indexed; a thread with its own
    store connection catches up, and the next search finds everything."""
    store = open_store(str(recorded["store"]), readonly=True)
    inline = Searcher(store, tmp_path / "inline.db")
    _, expected = inline.search("hello")
    inline.close()
    background = Searcher(store, tmp_path / "background.db")
    background.search("hello", wait=0)
    assert background._worker is not None
    background._worker.join(timeout=60)
    assert background.pending == 0 and background.error == ""
    assert background.search("hello", wait=5)[1] == expected >= 1
    background.close()
    store.close()


class _Counting:
    """A store whose listings are counted (what a search reads before it searches)."""

    def __init__(self, store: Any) -> None:
        self.store, self.calls = store, {"cassette_summaries": 0, "newest_cassettes": 0}

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.store, name)
        if name not in self.calls:
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return found(*args, **kwargs)

        return counted


def _copy_of(recorded: dict[str, Any], tmp_path: Path) -> Path:
    import shutil

    shutil.copytree(recorded["store"], tmp_path / "store")
    return tmp_path / "store"


def _more(path: Path, seeds: range, source_id: str | None = None) -> list[str]:
    """Copies of the episode ``source_id`` (default: the store's newest) under new seeds; their ids."""
    import dataclasses

    from replaykit.cassette.events import Episode

    writer = open_store(path)
    source = writer.get_episode(source_id or writer.cassette_summaries(1)[0]["id"])
    made = []
    with writer.write_lock():
        for seed in seeds:
            key = dataclasses.replace(source.key, seed=seed)
            episode = Episode(key, source.events, {**source.meta, "seed": seed})
            writer.put_episode(episode)
            made.append(episode.id)
    writer.close()
    return made


def test_a_search_of_an_unchanged_store_lists_nothing(recorded: dict[str, Any], tmp_path: Path) -> None:
    """The index keeps the store's change token: while it is the same, a search reads no
    listing; after a commit, only what is newer than the index's mark."""
    if str(recorded["store"]).startswith("postgresql"):
        pytest.skip("copies the store's folder")
    path = _copy_of(recorded, tmp_path)
    store = _Counting(open_store(path, readonly=True))
    searcher = Searcher(store, tmp_path / "search.db")
    assert searcher.refresh() == 6 and store.calls["cassette_summaries"] == 1  # the first build
    before = dict(store.calls)
    for _ in range(3):
        hits, found = searcher.search("hello")
        assert found >= 1
    assert store.calls == before  # unchanged: no listing at all
    # copies of an episode that matches (the newest one may be another task's)
    added = _more(path, range(500, 503), hits[0]["cassette_id"])
    assert searcher.refresh() == 3  # only the new ones
    assert store.calls["cassette_summaries"] == before["cassette_summaries"]  # no full listing
    assert store.calls["newest_cassettes"] == before["newest_cassettes"] + 1  # one page from the top
    assert {h["cassette_id"] for h in searcher.search("hello", limit=50)[0]} >= set(added)
    searcher.close()


def test_a_row_stored_in_the_mark_s_second_is_found_without_a_full_listing(
    recorded: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Times are to the second: an episode stored in the second of the index's mark whose id
    sorts before the mark's is still new to the index (before: missed by the look at what is
    newer, so every cassette was listed to find it)."""
    import json

    from replaykit.cassette.store import blobs

    if str(recorded["store"]).startswith("postgresql"):
        pytest.skip("copies the store's folder")
    path = _copy_of(recorded, tmp_path)
    store = _Counting(open_store(path, readonly=True))
    searcher = Searcher(store, tmp_path / "search.db")
    assert searcher.refresh() == 6
    when, last = json.loads(searcher.index.mark())
    monkeypatch.setattr(blobs, "now_iso", lambda: when)
    added: list[str] = []
    while not added or added[-1] > last:  # until a copy sorts before the mark within its second
        added += _more(path, range(700 + len(added), 701 + len(added)))
    before = dict(store.calls)
    assert searcher.refresh() == len(added)
    assert store.calls["cassette_summaries"] == before["cassette_summaries"]  # no full listing
    assert searcher.index.count() == 6 + len(added)
    searcher.close()


def test_a_new_searcher_resumes_from_the_index_s_mark(recorded: dict[str, Any], tmp_path: Path) -> None:
    if str(recorded["store"]).startswith("postgresql"):
        pytest.skip("copies the store's folder")
    path = _copy_of(recorded, tmp_path)
    first = Searcher(open_store(path, readonly=True), tmp_path / "search.db")
    assert first.refresh() == 6
    first.close()
    _more(path, range(600, 602))
    store = _Counting(open_store(path, readonly=True))
    again = Searcher(store, tmp_path / "search.db")
    seen: list[tuple[int, int]] = []
    again.progress = lambda indexed, total: seen.append((indexed, total))
    assert again.refresh() == 2 and store.calls["cassette_summaries"] == 0
    assert seen[-1] == (8, 8) and again.pending == 0 and again.indexed == again.total == 8
    again.close()


def test_a_removed_episode_leaves_the_index(recorded: dict[str, Any], tmp_path: Path) -> None:
    """A cassette removed (or stored under an older time) is found by the count: the index
    compares every id once and forgets what the store no longer holds."""
    if str(recorded["store"]).startswith("postgresql"):
        pytest.skip("copies the store's folder")
    path = _copy_of(recorded, tmp_path)
    reader = open_store(path, readonly=True)
    searcher = Searcher(reader, tmp_path / "search.db")
    searcher.refresh()
    hits = searcher.search("hello", limit=50)[0]
    gone = hits[0]["cassette_id"]
    writer = Store(path)
    with writer.write_lock():
        writer.driver.delete("cassettes", {"id": gone})
    writer.close()
    assert gone not in {h["cassette_id"] for h in searcher.search("hello", limit=50)[0]}
    assert searcher.index.count() == reader.count_cassettes() == 5
    searcher.close()


def test_the_first_search_of_a_large_store_says_how_far_the_index_is(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    """While the index catches up, the search page says how many episodes are searchable so
    far, of how many, and refreshes itself; the command is told after each batch."""
    from starlette.testclient import TestClient

    from replaykit.view import app as view_app

    store = open_store(recorded["store"], readonly=True)  # used in the app's thread only
    told: list[tuple[int, int]] = []
    searcher = Searcher(store, tmp_path / "search.db", progress=lambda i, t: told.append((i, t)))
    searcher.total, searcher.pending = 6, 4  # as mid-way through the first build
    searcher.search = lambda *a, **k: ([], 0)  # type: ignore[method-assign]  # the build is elsewhere
    with TestClient(view_app.create_app(store, searcher=searcher), base_url="http://127.0.0.1") as client:
        page = client.get("/search?q=hello").text
    assert "still indexing: 2 of 6 episode(s) searchable so far (4 to go)" in page, page
    assert 'http-equiv="refresh"' in page
    searcher.close()
    real = Searcher(
        open_store(recorded["store"], readonly=True),
        tmp_path / "real.db",
        progress=lambda i, t: told.append((i, t)),
    )
    real.refresh()
    assert told[-1] == (6, 6) and real.indexed == real.total == 6
    real.close()


def test_task_rates_are_computed_once_per_change(recorded: dict[str, Any], tmp_path: Path) -> None:
    """``/tasks`` is a named query of the store: each run's document is read once until someone
    commits; a commit (here a new run) makes the next page count again."""
    if str(recorded["store"]).startswith("postgresql"):
        pytest.skip("copies the store's folder")
    path = _copy_of(recorded, tmp_path)
    store = Store(path, readonly=True)
    reads: list[str] = []
    get_run = store.get_run

    def counted(run_id: str) -> Any:
        reads.append(run_id)
        return get_run(run_id)

    store.get_run = counted  # type: ignore[method-assign]
    first = store.task_rates()
    assert first["runs"] == 1 and len(reads) == 1
    assert {t["task_id"]: t["instances"] for t in first["tasks"]} == {"hello-file": 3, "fix-config-port": 3}
    first["tasks"][0]["solved"] = -1  # a caller's copy: the store's stays as computed
    again = store.task_rates()
    assert len(reads) == 1 and again["tasks"][0]["solved"] >= 0
    assert store.task_rates(model="nobody")["tasks"] == [] and len(reads) == 1  # no run of that model
    writer = Store(path)
    writer.put_run(RunDoc.read({**recorded["run"], "run_id": "another-run"}))
    writer.close()
    recounted = store.task_rates()
    assert recounted["runs"] == 2 and len(reads) == 3
    assert {t["task_id"]: t["instances"] for t in recounted["tasks"]} == {
        "hello-file": 6,
        "fix-config-port": 6,
    }
