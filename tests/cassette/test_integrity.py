"""Verify on read: damaged store data is "store corrupt: …", never "identical", never a divergence.

Each test first damages a copy of a small recorded store the way the issue's fault
campaign did (a flipped blob byte, an edited row, a row pointing at another
cassette's document, a forged bundle), then checks the one clear error.
"""

from __future__ import annotations

import gzip
import io
import json
import shutil
import sqlite3
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.cassette.stores import open_store
from replaykit.core.determinism import sha256_hex
from replaykit.core.errors import StoreCorrupt
from replaykit.core.modes import RecordMode
from replaykit.core.run_doc import RunDoc
from replaykit.episodes.replay import replay_run
from replaykit.episodes.run import measure
from replaykit.exchange.bundle import export_bundle
from replaykit.exchange.bundle_format import BundleError
from replaykit.exchange.importer import import_bundle
from replaykit.testing import small_config
from tests.cli_runner import cli
from tests.store_sql import raw_sql

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


TASKS = ["hello-file", "fix-config-port"]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two tasks × two seeds, recorded once; tests damage copies of its store."""
    tmp = tmp_path_factory.mktemp("integrity")
    config = small_config(
        tmp, tasks=TASKS, seeds=[0, 1], **{"model.name": "reference-weak", "env.timeout_sec": 23}
    )
    run = measure(config).run.to_json()  # the stored form, damaged below
    Store(config.store_path).close()
    return {"tmp": tmp, "config": config, "run": run, "store": Path(config.store_path)}


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def damaged(
    request: pytest.FixtureRequest, source: dict[str, Any], tmp_path: Path
) -> Iterator[dict[str, Any]]:
    """A private copy of the recorded store on each backend, and a raw connection to damage
    it: SQLite's own, or (PostgreSQL) the store's connection, which takes the same SQL."""
    if request.param == "sqlite":
        path = tmp_path / "store"
        shutil.copytree(source["store"], path)
        conn = sqlite3.connect(str(path / "index.db"), isolation_level=None)
        yield {"path": str(path), "tmp": tmp_path, "conn": conn, "run": source["run"]}
        conn.close()
        return
    from tests.pg import fresh_database

    bundle = tmp_path / "source.tar.gz"
    export_bundle(Store(source["store"], readonly=True), source["run"]["run_id"], bundle)
    with fresh_database("integrity") as url:
        raw = open_store(url)
        import_bundle(raw, bundle)
        yield {"path": url, "tmp": tmp_path, "conn": raw_sql(raw), "run": source["run"]}
        raw.close()


def replay_error(path: str, run_id: str) -> str:
    """Replay through the library and the CLI: both must say "store corrupt", exit 1, one line."""
    with pytest.raises(StoreCorrupt) as info:
        replay_run(open_store(path, readonly=True), run_id)
    out = cli("replay", run_id, "--store", path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.startswith("Error: store corrupt: ") and len(out.stderr.strip().splitlines()) == 1, (
        out.stderr
    )
    assert "identical" not in out.stdout and "Traceback" not in out.stderr and "diverge" not in out.stderr
    return str(info.value)


def a_doc_blob(conn: Any, cassette_id: str) -> str:
    return str(conn.execute("SELECT doc FROM cassettes WHERE id = ?", (cassette_id,)).fetchone()[0])


def test_flipped_byte_in_a_blob_is_store_corrupt(damaged: dict[str, Any]) -> None:
    conn, cid = damaged["conn"], damaged["run"]["cassettes"][0]
    # a response body: decoding it would still "work", only its hash shows the damage
    doc = json.loads(
        conn.execute("SELECT data FROM blobs WHERE hash = ?", (a_doc_blob(conn, cid),)).fetchone()[0]
    )
    digest = next(e["content"] for e in doc["events"] if e["kind"] == "llm")
    data = bytearray(conn.execute("SELECT data FROM blobs WHERE hash = ?", (digest,)).fetchone()[0])
    data[len(data) // 2] ^= 0x01
    conn.execute("UPDATE blobs SET data = ? WHERE hash = ?", (bytes(data), digest))
    message = replay_error(damaged["path"], damaged["run"]["run_id"])
    assert f"blob {digest[:12]}… does not match its content address (cassette {cid})" in message


def test_row_pointing_at_another_cassettes_document_is_caught(damaged: dict[str, Any]) -> None:
    conn = damaged["conn"]
    first, second = damaged["run"]["cassettes"][:2]
    conn.execute("UPDATE cassettes SET doc = ? WHERE id = ?", (a_doc_blob(conn, second), first))
    message = replay_error(damaged["path"], damaged["run"]["run_id"])
    assert f"cassette row {first} points at the document of cassette {second}" in message


@pytest.mark.parametrize(
    "column,value",
    [
        ("digest", "0" * 64),
        ("passed", 1),
        ("reward", 1.0),
        ("n_llm", 99),
        ("tokens", 7),
        ("infra_failure", 1),
    ],
)
def test_edited_cached_column_is_caught(damaged: dict[str, Any], column: str, value: Any) -> None:
    conn, run = damaged["conn"], damaged["run"]
    failed = next(
        e["cassette_id"] for e in run["episodes"] if not e["passed"]
    )  # passed=1 on a failed episode
    conn.execute(f"UPDATE cassettes SET [{column}] = ? WHERE id = ?", (value, failed))
    message = replay_error(damaged["path"], run["run_id"])
    assert f"cassette {failed}: column(s) {column} do not match its events" in message
    if (
        column == "infra_failure"
    ):  # an infra failure is never reused: measuring re-records it, a fresh verified cassette
        assert failed in measure(damaged_config(damaged), record_mode=RecordMode.ONCE).recorded
        return
    # measuring from the cassettes (what a training's verdicts are computed from) refuses too
    with pytest.raises(StoreCorrupt, match=column):
        measure(
            damaged_config(damaged), record_mode=RecordMode.ONCE
        )  # every cassette present: nothing is recorded


def damaged_config(damaged: dict[str, Any]) -> Any:
    cfg = small_config(
        damaged["tmp"],
        tasks=TASKS,
        seeds=[0, 1],
        **{"model.name": "reference-weak", "env.timeout_sec": 23, "store": damaged["path"]},
    )
    return cfg


def test_run_row_pointing_at_another_document_is_caught(
    damaged: dict[str, Any], source: dict[str, Any]
) -> None:
    conn, run = damaged["conn"], damaged["run"]
    store = open_store(damaged["path"])
    other = dict(run, run_id="f" * 16)
    store.put_doc(
        "f" * 16,
        "measure",
        other,
        harness_sha=run["harness_sha"],
        model=run["model"]["name"],
        endpoint=run["model"]["endpoint"],
        config_digest=run["config_digest"],
    )
    store.close()
    other_doc = conn.execute("SELECT doc FROM runs WHERE id = ?", ("f" * 16,)).fetchone()[0]
    conn.execute("UPDATE runs SET doc = ? WHERE id = ?", (other_doc, run["run_id"]))
    message = replay_error(damaged["path"], run["run_id"])
    assert f"measure {run['run_id']}: document is for ffffffffffffffff" in message


def test_run_document_claiming_a_pass_is_caught(damaged: dict[str, Any]) -> None:
    """A run document (what verdicts are computed from) whose episode says passed where its cassette failed."""
    run = json.loads(json.dumps(damaged["run"]))
    entry = next(e for e in run["episodes"] if not e["passed"])
    entry["passed"], run["solved"] = True, run["solved"] + 1
    store = open_store(damaged["path"])
    store.put_run(RunDoc.read(run))
    store.close()
    message = replay_error(damaged["path"], run["run_id"])
    assert f"episode {entry['cassette_id']} field(s) passed do not match its cassette" in message


def test_missing_blob_is_store_corrupt(damaged: dict[str, Any]) -> None:
    conn, cid = damaged["conn"], damaged["run"]["cassettes"][1]
    conn.execute("DELETE FROM blobs WHERE hash = ?", (a_doc_blob(conn, cid),))
    assert "is missing" in replay_error(damaged["path"], damaged["run"]["run_id"])


def test_export_verifies_before_writing(damaged: dict[str, Any], tmp_path: Path) -> None:
    conn, run = damaged["conn"], damaged["run"]
    conn.execute("UPDATE cassettes SET passed = 1 - passed WHERE id = ?", (run["cassettes"][0],))
    out = tmp_path / "out.tar.gz"
    with pytest.raises(StoreCorrupt, match="column\\(s\\) passed"):
        export_bundle(open_store(damaged["path"], readonly=True), run["run_id"], out)
    assert not out.exists() and not list(tmp_path.glob(".out.tar.gz-*"))


def test_show_and_ls_run_say_store_corrupt(damaged: dict[str, Any]) -> None:
    conn, cid = damaged["conn"], damaged["run"]["cassettes"][0]
    conn.execute("UPDATE cassettes SET digest = ? WHERE id = ?", ("1" * 64, cid))
    out = cli("cassettes", "show", cid, "--store", damaged["path"])
    assert (
        out.returncode == 1
        and out.stderr.startswith("Error: store corrupt: cassette")
        and "Traceback" not in out.stderr
    )


# -- forged bundles ----------------------------------------------------------------------------------
def rewrite_bundle(path: Path, out: Path, edit: Any) -> None:
    """Edit a bundle's members, then recompute its manifest (a forger who knows the format)."""
    with tarfile.open(path, "r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    edit(members)
    manifest = json.loads(members["manifest.json"])
    manifest["members"] = {
        n: {"sha256": sha256_hex(d), "size": len(d)} for n, d in members.items() if n != "manifest.json"
    }
    members["manifest.json"] = json.dumps(manifest).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out.write_bytes(gzip.compress(buf.getvalue()))


def test_forged_bundle_with_a_pass_on_a_failed_episode_is_refused(
    source: dict[str, Any], tmp_path: Path
) -> None:
    run = source["run"]
    bundle = tmp_path / "run.tar.gz"
    export_bundle(Store(source["store"], readonly=True), run["run_id"], bundle)
    failed = next(e["cassette_id"] for e in run["episodes"] if not e["passed"])

    def forge(members: dict[str, bytes]) -> None:
        rows = json.loads(members["index/cassettes.json"])
        for row in rows:
            if row["id"] == failed:
                row["passed"], row["reward"] = 1, 1.0
        members["index/cassettes.json"] = json.dumps(rows).encode()

    forged = tmp_path / "forged.tar.gz"
    rewrite_bundle(bundle, forged, forge)
    with pytest.raises(
        BundleError, match=f"cassette {failed}: column\\(s\\) reward, passed do not match its events"
    ):
        import_bundle(Store(tmp_path / "target"), forged)
    assert not (tmp_path / "target").exists()

    def forge_run_too(members: dict[str, bytes]) -> None:
        """The run document says passed as well (and solved + 1), its blob renamed to its new hash."""
        forge(members)
        runs = json.loads(members["index/runs.json"])
        doc = json.loads(members[f"blobs/{runs[0]['doc']}"])
        for entry in doc["episodes"]:
            if entry["cassette_id"] == failed:
                entry["passed"], entry["reward"] = True, 1.0
        doc["solved"] += 1
        data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        members[f"blobs/{sha256_hex(data)}"] = data
        runs[0]["doc"] = sha256_hex(data)
        members["index/runs.json"] = json.dumps(runs).encode()

    rewrite_bundle(bundle, forged, forge_run_too)
    out = cli("cassettes", "import", str(forged), "--store", str(tmp_path / "target"))
    assert out.returncode == 1 and "do not match its events (forged or corrupt); refusing" in out.stderr, (
        out.stderr
    )
    assert not (tmp_path / "target").exists()
