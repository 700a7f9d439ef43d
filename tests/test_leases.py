"""Referential integrity under concurrency: ``gc`` and ``cassettes rm`` racing a live
``run`` and ``train`` never take what those are about to reference (leases), and
``cassettes verify`` checks that every reference of every kept document resolves."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.stores import is_url, open_store
from replaykit.core.errors import StoreError
from replaykit.exchange.gc import remove
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli
from tests.store_sql import driver_of, rewrite

TRIALS = 5


def ok_json(*args: str, cwd: Path) -> Any:
    proc = cli(*args, "--json", cwd=cwd)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


class GcLoop:
    """``gc`` over and over (its own connection, as another process would) until stopped."""

    def __init__(self, store: Path | str) -> None:
        self.store, self.stop, self.rounds, self.removed = store, threading.Event(), 0, 0
        self.errors: list[str] = []
        self.rm_accepted: list[str] = []
        self.rm_refused: list[str] = []
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        while not self.stop.is_set():
            if is_url(self.store) or (Path(self.store) / "index.db").exists():
                try:
                    target = open_store(self.store)
                    report = remove(target, [])
                    self.rounds += 1
                    self.removed += len(report["trees"]) + report["blobs"]
                    self.try_rm(target)
                    target.close()
                except StoreError as exc:  # e.g. the schema not there yet
                    self.errors.append(str(exc))
            time.sleep(0.02)

    def try_rm(self, store: StoreBackend) -> None:
        """``cassettes rm`` of the newest cassette: a live writer's is refused (leased, or referenced)."""
        ids = [str(r[0]) for r in store.index_rows("cassettes", "id")]
        if not ids:
            return
        try:
            remove(store, [ids[-1]])
            self.rm_accepted.append(ids[-1])
        except StoreError as exc:
            self.rm_refused.append(str(exc))

    def __enter__(self) -> GcLoop:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


@pytest.mark.e2e
def test_gc_in_a_loop_during_a_cold_run_and_a_train(tmp_path: Path) -> None:
    rounds = in_use = 0
    for trial in range(TRIALS):
        base = tmp_path / f"t{trial}"
        base.mkdir()
        tasks = [str(REPO_ROOT / "envs" / "hello-file")]
        config = write_config(base, {"panel.tasks": tasks, "panel.seeds": [trial]})
        store = base / "store"
        with GcLoop(store) as gc:
            run = ok_json("run", str(config), cwd=base)
            training = ok_json("train", str(config), "--epochs", "1", cwd=base)
        assert gc.rounds > 0, gc.errors  # gc really ran alongside
        assert gc.rm_accepted == [], gc.rm_accepted  # no cassette of the live run or train was removable
        in_use += sum("in use by a running replaykit process" in m for m in gc.rm_refused)
        rounds += gc.rounds
        assert ok_json("replay", run["run_id"], "--store", str(store), cwd=base)["identical"], trial
        replayed = ok_json("replay", training["training_id"], "--store", str(store), cwd=base)
        assert replayed["identical"], (trial, replayed)
        report = ok_json("cassettes", "verify", "--store", str(store), cwd=base)
        assert report["ok"] is True and report["damaged"] == [], (trial, report)
        # the writers are gone: their leases no longer keep anything (gc finds the old training docs)
        with sqlite3.connect(store / "index.db") as conn:
            assert conn.execute("SELECT count(*) FROM leases").fetchone()[0] == 0
    assert (
        rounds >= TRIALS and in_use > 0
    )  # some refusals were leases (fresh cassettes no document names yet)


@pytest.mark.e2e
@pytest.mark.postgres
def test_gc_in_a_loop_during_a_run_and_a_train_into_postgres(tmp_path: Path) -> None:
    from tests.pg import fresh_database

    with fresh_database("gcloop") as url:
        tasks = [str(REPO_ROOT / "envs" / "hello-file")]
        config = write_config(tmp_path, {"panel.tasks": tasks, "panel.seeds": [0], "store": url})
        with GcLoop(url) as gc:
            run = ok_json("run", str(config), cwd=tmp_path)
            training = ok_json("train", str(config), "--epochs", "1", cwd=tmp_path)
        assert gc.rounds > 0, gc.errors
        assert ok_json("replay", run["run_id"], "--store", url, cwd=tmp_path)["identical"]
        assert ok_json("replay", training["training_id"], "--store", url, cwd=tmp_path)["identical"]
        report = ok_json("cassettes", "verify", "--store", url, cwd=tmp_path)
        assert report["ok"] is True and report["damaged"] == [], report
        store = open_store(url, readonly=True)
        assert driver_of(store).count("leases") == 0


@pytest.mark.unit
def test_leases_keep_what_a_live_writer_wrote_and_refuse_its_removal(store_location: str) -> None:
    store = open_store(store_location)
    with store.leasing():
        store.put_tree("a" * 40, {"harness.py": (0o644, b"print(1)\n")})
        blob = store.put_blob(b"about to be referenced")
        other = open_store(store_location)  # another connection, as `replaykit gc` would open
        report = remove(other, [])
        assert report["trees"] == [] and report["blobs"] == 0
        assert store.has_tree("a" * 40) and store.has_blob(blob)
        assert set(other.leased()["trees"]) == {"a" * 40}
    assert other.leased()["trees"] == {}  # released when the scope ends
    report = remove(other, [])
    assert report["trees"] == ["a" * 40] and report["blobs"] == 2  # the file and the loose blob


@pytest.mark.unit
def test_a_dead_writers_leases_are_ignored_and_pruned(store_location: str) -> None:
    store = open_store(store_location)
    with store.leasing():
        store.put_blob(b"x")
        assert rewrite(store, "leases", {}, lambda r: {**r, "pid": 999999999}) == 1  # no such process
        assert store.leased()["blobs"] == {}
        assert remove(open_store(store_location), [])["blobs"] == 1
        assert driver_of(store).count("leases") == 0


@pytest.mark.unit
def test_rm_of_a_leased_document_is_refused(store_location: str) -> None:
    store, doc_id = open_store(store_location), "0123456789abcdef"
    with store.leasing():
        store.put_doc(doc_id, "compare", {"kind": "compare"})
        with pytest.raises(StoreError, match="is in use by a running replaykit process"):
            remove(open_store(store_location), [doc_id])
    assert remove(open_store(store_location), [doc_id])["runs"] == [{"id": doc_id, "kind": "compare"}]


@pytest.mark.unit
def test_verify_names_a_reference_that_is_gone(store_location: str) -> None:
    from replaykit.exchange.fsck import verify_store

    store = open_store(store_location)
    store.put_doc("d" * 16, "training", {"training_id": "d" * 16, "kind": "training", "trees": ["b" * 40]})
    report = verify_store(open_store(store_location, readonly=True))
    assert not report["ok"]
    assert report["damaged"][0]["error"].startswith(
        f"store corrupt: training {'d' * 16} references harness tree {'b' * 16}, which is not in the store"
    ), report
