"""Store: atomic episode writes, content-addressed dedup, key look-ups, trees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.events import EnvEvent, Episode, Event, GradeEvent, LlmEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.store import Store
from replaykit.cassette.stores import open_store
from replaykit.core.errors import CassetteNotFound, StoreError
from replaykit.envs.results import Grade, Observation


def make_key(seed: int = 0) -> CassetteKey:
    return CassetteKey("a" * 40, "task", "d" * 64, ModelId("m", "builtin", "r"), seed, "cfg")


def make_episode(history: int = 3, seed: int = 0) -> Episode:
    messages = [{"role": "user", "content": f"message {i} " + "x" * 300} for i in range(history)]
    events: list[Event] = [
        LlmEvent(
            "POST",
            "/v1/chat/completions",
            {"model": "m", "messages": messages[: i + 1]},
            200,
            "OK",
            [("content-type", "application/json")],
            b'{"ok": %d}' % i,
            [5, 5],
        )
        for i in range(history)
    ]
    events.append(EnvEvent("echo hi", Observation("hi\n", "", 0), "s" * 64))
    events.append(GradeEvent(Grade(1.0, True)))
    return Episode(make_key(seed), events, {"kind": "meta"})


def test_round_trip_keeps_every_event(store_location: str) -> None:
    store = open_store(store_location)
    episode = make_episode()
    store.put_episode(episode)
    loaded = open_store(store_location).get_episode(episode.id)
    assert loaded.digest == episode.digest
    assert [e.kind for e in loaded.events] == ["llm", "llm", "llm", "env", "grade"]
    assert loaded.llm_events[2].body == episode.llm_events[2].body
    assert loaded.llm_events[0].split_chunks() == [b'{"ok"', b": 0}"]
    assert loaded.meta == {"kind": "meta"}


def test_resent_history_is_stored_once(store_location: str) -> None:
    store = open_store(store_location)
    store.put_episode(make_episode(history=20))
    sizes = [int(str(r[0])) for r in store.index_rows("blobs", "size")]
    # 20 distinct messages of ~320 bytes each, re-sent 210 times in total: stored once each.
    assert sum(1 for s in sizes if 300 <= s <= 400) == 20
    naive = sum(len(json.dumps(e.body)) for e in make_episode(history=20).llm_events)
    assert sum(sizes) < naive / 2


def test_key_lookup_and_unknown_id(store_location: str) -> None:
    store = open_store(store_location)
    episode = make_episode()
    assert not store.has(episode.id)
    store.put_episode(episode)
    assert store.has(episode.id)
    assert store.cassette_row(episode.id)["passed"] == 1
    with pytest.raises(CassetteNotFound, match="replaykit cassettes ls"):
        store.get_episode("nope")


def test_failed_write_leaves_no_half_cassette(store_location: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(store_location)
    assert isinstance(store, Store)
    store.put_episode(make_episode(seed=1))
    before = len(store.index_rows("blobs", "hash"))
    insert = type(store.driver).insert

    def boom(driver: Any, table: str, *args: Any, **kwargs: Any) -> None:
        if table == "cassettes":  # after the episode's blobs, before its row
            raise RuntimeError("killed mid-write")
        insert(driver, table, *args, **kwargs)

    monkeypatch.setattr(type(store.driver), "insert", boom)
    with pytest.raises(RuntimeError):
        store.put_episode(make_episode(history=5, seed=2))
    monkeypatch.undo()
    assert len(store.index_rows("blobs", "hash")) == before
    assert not store.has(make_key(2).id)


def test_trees_materialise_with_modes(store_location: str) -> None:
    store = open_store(store_location)
    store.put_tree("b" * 40, {"harness.py": (0o100644, b"x = 1\n"), "bin/run": (0o100755, b"#!/bin/sh\n")})
    tree = store.materialise_tree("b" * 40)
    assert (tree / "harness.py").read_text() == "x = 1\n"
    assert (tree / "bin/run").stat().st_mode & 0o111
    row = store.get_row("trees", "b" * 40)
    assert row is not None and isinstance(manifest := row["manifest"], str)
    assert json.loads(manifest)["harness.py"][0] == 0o100644


def test_a_second_writer_never_removes_a_tree_another_process_is_reading(tmp_path: Path) -> None:
    """Two processes that both found no cached tree write one each: the second keeps the first's
    (a reader may be inside it), and replaces only a copy whose bytes differ."""
    store = open_store(str(tmp_path / "store"))
    files = {"environment/Dockerfile": (0o100644, b"FROM scratch\n")}
    store.put_tree("c" * 40, files)
    tree = store.materialise_tree("c" * 40)
    held = (tree / "environment" / "Dockerfile").stat().st_ino
    Store._write_tree(tree, "c" * 40, files)  # the late writer of the same tree
    assert (tree / "environment" / "Dockerfile").stat().st_ino == held
    (tree / "environment" / "Dockerfile").write_bytes(b"FROM changed\n")
    assert store.materialise_tree("c" * 40) == tree
    assert (tree / "environment" / "Dockerfile").read_bytes() == b"FROM scratch\n"
    assert [p.name for p in tree.parent.iterdir()] == [tree.name]  # no temporary left behind


def test_unreadable_store_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "index.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="cannot open store"):
        Store(tmp_path).count_cassettes()


@pytest.mark.postgres
def test_unreachable_or_missing_postgres_store_is_one_clear_error() -> None:
    from tests.pg import database_url

    with pytest.raises(
        StoreError, match=r"^cannot open store postgresql://nobody@127\.0\.0\.1:1/x: .*check the URL"
    ):
        open_store("postgresql://nobody:pw@127.0.0.1:1/x").count_cassettes()
    missing = open_store(database_url("replaykit"), readonly=True)  # the server's own database: no store
    assert not missing.exists()
    with pytest.raises(StoreError, match=r"^no store at postgresql://replaykit@.*\(no replaykit tables\)"):
        missing.count_cassettes()


def test_a_readonly_store_never_writes(store_location: str) -> None:
    writer = open_store(store_location)
    writer.put_episode(make_episode())
    reader = open_store(store_location, readonly=True)
    assert reader.has(make_key().id) and reader.readonly
    with pytest.raises(StoreError, match="open read-only"):
        reader.put_blob(b"x")
    assert "replaykit:replaykit@" not in reader.location  # a password is never shown


@pytest.mark.postgres
def test_a_lost_postgres_connection_is_one_line() -> None:
    import psycopg

    from tests.pg import SERVER, fresh_database

    with fresh_database("lost") as url:
        store = open_store(url)
        digest = store.put_blob(b"kept")
        with psycopg.connect(SERVER, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (url.rsplit("/", 1)[1],),
            )
        with pytest.raises(
            StoreError, match=r"^store postgresql://replaykit@127\.0\.0\.1:\d+/\w+: \w+: .*check the server"
        ):
            store.get_blob(digest)
        assert store.reopen().get_blob(digest) == b"kept"  # nothing lost: a new connection reads it
