"""A listing shows every row it can read and marks a damaged one (issue 38 item 9): one run
document naming a cassette the store does not hold made ``replaykit runs`` exit 1 for the whole
store ("no cassette '9c28…'"). ``runs``, ``cassettes ls`` (all, and ``--run`` of the damaged run)
and the viewer's run and episode lists list the good rows and name the damaged one, as
``cassettes verify`` does."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from replaykit.cassette.stores import open_store
from replaykit.core.run_doc import RunDoc
from replaykit.testing import project_root, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

GHOST = "9c28" + "0" * 20  # a cassette id the store never held


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("listings")
    tasks = [str(project_root() / "envs" / t) for t in ("hello-file", "fix-config-port")]
    config = write_config(tmp, {"panel.tasks": tasks, "panel.seeds": [0]})
    good = json.loads(cli("run", str(config), "--json", check=True).stdout)
    store = open_store(str(tmp / "store"))
    doc: Any = copy.deepcopy(store.get_doc(good["run_id"]))
    doc["run_id"] = bad = "badrun" + "0" * 10
    doc["cassettes"] = [*doc["cassettes"][:-1], GHOST]  # its last episode's cassette is not in the store
    doc["episodes"] = [*doc["episodes"][:-1], {**doc["episodes"][-1], "cassette_id": GHOST}]
    store.put_run(RunDoc.read(doc))
    store.close()
    return {"config": str(config), "store": str(tmp / "store"), "good": good["run_id"], "bad": bad}


def test_runs_lists_every_readable_row_and_marks_the_damaged_one(damaged: dict[str, Any]) -> None:
    proc = cli("runs", "--store", damaged["store"], "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["id"]: r for r in json.loads(proc.stdout)}
    assert "damaged" not in rows[damaged["good"]] and rows[damaged["good"]]["stats"]
    assert GHOST[:16] in rows[damaged["bad"]]["damaged"], rows[damaged["bad"]]
    table = cli("runs", "--store", damaged["store"], env={"COLUMNS": "80"})
    assert table.returncode == 0, table.stderr
    assert damaged["good"][:8] in table.stdout and f"damaged: {damaged['bad']}" in table.stdout + table.stderr


def test_cassettes_ls_marks_what_it_cannot_read(damaged: dict[str, Any]) -> None:
    every = cli("cassettes", "ls", "--store", damaged["store"], "--json")
    assert every.returncode == 0 and len(json.loads(every.stdout)) == 2, every.stderr
    proc = cli("cassettes", "ls", "--run", damaged["bad"], "--store", damaged["store"], "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["id"] for r in rows][-1] == GHOST and rows[-1]["damaged"] == f"no cassette '{GHOST}'"
    assert all("damaged" not in r for r in rows[:-1]) and len(rows) == 2
    table = cli("cassettes", "ls", "--run", damaged["bad"], "--store", damaged["store"])
    assert table.returncode == 0 and "damaged" in table.stdout + table.stderr, table.stderr


def test_the_viewer_lists_runs_and_marks_the_damaged_one(damaged: dict[str, Any]) -> None:
    from starlette.testclient import TestClient

    from replaykit.view.app import create_app

    reader = open_store(damaged["store"], readonly=True)  # opened in the app's thread, on first use
    with TestClient(create_app(reader), base_url="http://127.0.0.1") as client:  # one thread
        page = client.get("/runs")
        assert page.status_code == 200 and damaged["good"] in page.text
        assert f"damaged: run {damaged['bad']} names cassette {GHOST}" in page.text, page.text[-2000:]
        assert client.get("/episodes").status_code == 200


def test_the_viewer_lists_compares_and_marks_one_it_cannot_read(
    damaged: dict[str, Any], tmp_path: Any
) -> None:
    import shutil

    from starlette.testclient import TestClient

    from replaykit.view.app import create_app
    from tests.store_sql import rewrite

    copy = tmp_path / "store"
    shutil.copytree(damaged["store"], copy)
    store = open_store(str(copy))
    store.put_doc("cmp-damaged-0001", "compare", {"kind": "compare", "models": ["m"], "harnesses": []})
    assert rewrite(store, "runs", {"id": "cmp-damaged-0001"}, lambda r: {**r, "doc": "0" * 64}) == 1
    store.close()
    with TestClient(create_app(open_store(str(copy), readonly=True)), base_url="http://127.0.0.1") as client:
        page = client.get("/compares")
    assert page.status_code == 200 and "damaged: " in page.text and "cmp-damaged-0001" in page.text


def test_cassettes_ls_reads_the_rows_documents_together_and_marks_a_damaged_one(
    damaged: dict[str, Any], tmp_path: Any
) -> None:
    """The listing's outcomes come from one read of the listed documents, not one read a row; a
    document that does not verify marks its row only (each row then reads its own)."""
    import shutil

    from replaykit.episodes.listing import list_cassettes
    from tests.store_sql import rewrite

    copy = tmp_path / "store"
    shutil.copytree(damaged["store"], copy)
    store: Any = open_store(str(copy), readonly=True)  # its driver's reads are counted
    driver = store.driver
    reads: list[str] = []
    select = driver.select

    def counted(table: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(table)
        return select(table, *args, **kwargs)

    driver.select = counted
    rows = list_cassettes(store)
    assert len(rows) == 2 and all(r["outcome"] != "damaged" for r in rows), rows
    assert reads.count("blobs") == 1, reads  # one a row before
    store.close()
    writer = open_store(str(copy))
    victim = str(rows[0]["id"])
    doc = writer.cassette_row(victim)["doc"]
    assert rewrite(writer, "blobs", {"hash": doc}, lambda r: {**r, "data": b"{}"}) == 1
    writer.close()
    marked = {str(r["id"]): r for r in list_cassettes(open_store(str(copy), readonly=True))}
    assert marked[victim]["outcome"] == "damaged" and "damaged" in marked[victim], marked[victim]
    assert [r["outcome"] for i, r in marked.items() if i != victim] == [rows[1]["outcome"]]
