"""A document written again under its id (a training saves after every epoch) drops the blob
of the version it replaced, unless something else names it; a reader that reads the row and
then its blob while that happens reads the new version, never "store corrupt". On every
backend (``store_location``: SQLite, PostgreSQL, the store plugin)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.cassette.stores import open_store
from replaykit.core.determinism import canonical_json, sha256_hex
from replaykit.core.errors import StoreCorrupt
from replaykit.core.run_doc import RunDoc
from replaykit.exchange.gc import plan
from replaykit.testing import write_config
from tests.cli_runner import cli


def training_doc(n: int) -> dict[str, Any]:
    """Version ``n`` of a training-like document (it grows by an epoch each time)."""
    return {"training_id": "t" * 16, "epochs": [{"epoch": i, "decision": "rejected"} for i in range(n)]}


def doc_hash(doc: dict[str, Any]) -> str:
    return sha256_hex(canonical_json(doc).encode("utf-8"))


class Racing:
    """A driver that lets ``between`` run once, right after the reader read a ``runs`` row and
    before it reads a blob: the interleaving a polling viewer meets now and then, every time."""

    def __init__(self, inner: Any, between: Callable[[], None]) -> None:
        self.inner, self.between, self.armed, self.row_read = inner, between, True, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def select(self, table: str, *args: Any, **kw: Any) -> Any:
        if table == "blobs" and self.armed and self.row_read:
            self.armed = False
            self.between()
        rows = self.inner.select(table, *args, **kw)
        self.row_read = self.row_read or (table == "runs" and bool(rows) and "doc" in rows[0])
        return rows


def test_a_replaced_documents_blob_goes_unless_something_else_names_it(store_location: str) -> None:
    store = open_store(store_location)
    store.put_doc("t" * 16, "training", training_doc(1))
    store.put_doc("t" * 16, "training", training_doc(2))
    assert not store.has_blob(doc_hash(training_doc(1)))  # replaced: gone
    assert store.get_doc("t" * 16, kind="training")["epochs"] == training_doc(2)["epochs"]
    # the same bytes named by another row stay when one of the two moves on
    twin = {**training_doc(2), "name": "same"}
    store.put_doc("t" * 16, "training", twin)
    store.put_doc("t" * 16, "training", training_doc(3))
    assert not store.has_blob(doc_hash(twin))
    # a blob a live writer leased (about to name it) stays
    with store.leasing():
        leased = store.put_blob(canonical_json(training_doc(4)).encode("utf-8"))
        store.put_doc("t" * 16, "training", training_doc(4))
        store.put_doc("t" * 16, "training", training_doc(5))
        assert store.has_blob(leased)
    # writing the same version again keeps its blob
    store.put_doc("t" * 16, "training", training_doc(5))
    assert store.has_blob(doc_hash(training_doc(5)))
    assert plan(store, []).blobs == [leased]  # only the lease's blob, now free, is garbage
    store.close()


def test_a_reader_between_the_row_and_its_blob_reads_the_new_version(store_location: str) -> None:
    writer = open_store(store_location)
    writer.put_doc("t" * 16, "training", training_doc(1))
    base = open_store(store_location, readonly=True)
    assert isinstance(base, Store)

    def replace() -> None:
        writer.put_doc("t" * 16, "training", training_doc(2))
        assert not writer.has_blob(doc_hash(training_doc(1)))

    racing = Racing(base.driver, replace)
    doc = Store(racing).get_doc("t" * 16, kind="training")  # row of version 1, blob read after version 2
    assert racing.armed is False and doc["epochs"] == training_doc(2)["epochs"]
    # the run reader and the training look-up take the same care
    writer.put_run(_run("r" * 16, "first"))
    racing = Racing(base.driver, lambda: writer.put_run(_run("r" * 16, "second")))
    assert Store(racing).get_run("r" * 16).name == "second" and racing.armed is False
    # a blob missing under a row that did not change is damage, said so
    writer.put_doc("t" * 16, "training", training_doc(3))
    assert isinstance(writer, Store)
    writer.driver.delete("blobs", {"hash": doc_hash(training_doc(3))})
    with pytest.raises(StoreCorrupt, match="is missing"):
        base.get_doc("t" * 16, kind="training")
    base.close()
    writer.close()


def _run(run_id: str, name: str) -> RunDoc:
    return RunDoc.read(
        {
            "run_id": run_id,
            "name": name,
            "kind": "measure",
            "harness_sha": "0" * 40,
            "model": {"name": "m", "endpoint": "builtin"},
            "config_digest": "c",
            "panel": {"tasks": [], "seeds": []},
            "episodes": [],
            "cassettes": [],
            "solved": 0,
            "total": 0,
        }
    )


def test_a_concurrent_reader_never_sees_corruption_while_documents_are_replaced(
    store_location: str,
) -> None:
    writer = open_store(store_location)
    writer.put_doc("t" * 16, "training", training_doc(0))
    stop, errors, reads = threading.Event(), [], [0]

    def read() -> None:
        reader = open_store(store_location, readonly=True)
        try:
            while not stop.is_set():
                try:
                    reader.get_doc("t" * 16, kind="training")
                    reads[0] += 1
                except Exception as exc:  # the point: none at all
                    errors.append(f"{type(exc).__name__}: {exc}")
                    return
        finally:
            reader.close()

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for n in range(1, 120):
            writer.put_doc("t" * 16, "training", training_doc(n))
    finally:
        stop.set()
        thread.join(60)
    assert errors == [] and reads[0] > 0
    assert plan(writer, []).blobs == []  # 119 replacements, no superseded version left
    writer.close()


@pytest.mark.e2e
def test_a_quickstart_training_leaves_no_unreferenced_blob(store_location: str, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"store": store_location})
    trained = cli("train", str(config), "--json")
    assert trained.returncode == 0, trained.stderr
    assert len(json.loads(trained.stdout)["epochs"]) == 5
    proc = cli("gc", "--dry-run", "--store", store_location, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["blobs"], report["trees"], report["runs"], report["cassettes"]) == (0, [], [], [])
    proc = cli("cassettes", "verify", "--store", store_location, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
