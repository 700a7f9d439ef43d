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
from replaykit.cassette.stores import open_store
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
        run = measure(config).run
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
    from replaykit.view import queries

    reader = open_store(recorded["store"], readonly=True)  # opened in the app's thread, on first use
    asked = queries.trainings

    def trainings_then_a_commit(store: BrowseStore) -> TrainingsPage:
        page = asked(store)
        writer = open_store(recorded["store"])
        writer.put_doc("view-test-race", "note", {"landed": "mid-page"})
        writer.close()
        return page

    monkeypatch.setattr(queries, "trainings", trainings_then_a_commit)
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
