"""Many machines, one PostgreSQL store: two drivers in separate processes (each with its
own harness checkout, as on two machines) record into one database at the same time; a
third process replays both runs from it, offline and identical."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replaykit.cassette.stores import open_store
from replaykit.testing import write_config
from tests.cli_runner import cli

pytestmark = [pytest.mark.postgres, pytest.mark.e2e]

TASKS = ["hello-file", "fix-config-port", "count-error-lines"]


def machine(tmp_path: Path, name: str, url: str, seeds: list[int]) -> Path:
    """A machine's own folder: its config (pointing at the shared store) and harness repo;
    each machine measures its own seeds of the same panel (shared blobs, tree, harness)."""
    root = tmp_path / name
    root.mkdir()
    tasks = [str(Path(__file__).resolve().parents[2] / "envs" / t) for t in TASKS]
    return write_config(root, {"store": url, "panel.tasks": tasks, "panel.seeds": seeds})


def test_two_writers_into_one_postgres_store_replay_identical(tmp_path: Path) -> None:
    from tests.pg import fresh_database

    with fresh_database("twowriters") as url:
        configs = [machine(tmp_path, "machine-a", url, [0, 1]), machine(tmp_path, "machine-b", url, [2, 3])]
        drivers = [
            subprocess.Popen(
                [sys.executable, "-m", "replaykit.cli", "run", str(config), "--json"],
                cwd=config.parent,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for config in configs
        ]
        outputs = [d.communicate(timeout=600) for d in drivers]
        for driver, (_, err) in zip(drivers, outputs, strict=True):
            assert driver.returncode == 0, err
        runs = [json.loads(out) for out, _ in outputs]
        assert all(len(r["cassettes"]) == len(TASKS) * 2 for r in runs)
        assert runs[0]["run_id"] != runs[1]["run_id"] and not set(runs[0]["cassettes"]) & set(
            runs[1]["cassettes"]
        )

        store = open_store(url, readonly=True)
        assert store.count_cassettes() == 2 * len(TASKS) * 2
        assert {r["id"] for r in store.list_runs()} == {r["run_id"] for r in runs}

        for run in runs:  # the third process: replay from the shared store, offline
            proc = cli("replay", run["run_id"], "--store", url, "--json", cwd=tmp_path, check=True)
            report = json.loads(proc.stdout)
            assert report["identical"] and len(report["episodes"]) == len(TASKS) * 2
            assert {e["replayed_digest"] for e in report["episodes"]} == {
                e["digest"] for e in run["episodes"]
            }
        fsck = json.loads(cli("cassettes", "verify", "--store", url, "--json", check=True).stdout)
        assert fsck["ok"] and "replaykit:replaykit@" not in json.dumps(fsck)


def test_bundles_move_runs_between_backends_and_gc_works_on_postgres(tmp_path: Path) -> None:
    """A run recorded into SQLite, exported, imported into PostgreSQL, replayed there;
    ``cassettes rm -r`` then ``gc`` empty the PostgreSQL store again."""
    from tests.pg import fresh_database

    config = write_config(tmp_path, {"panel.seeds": [0]})
    run = json.loads(cli("run", str(config), "--json", cwd=tmp_path, check=True).stdout)
    bundle = tmp_path / "run.tar.gz"
    cli(
        "cassettes",
        "export",
        run["run_id"],
        "-o",
        str(bundle),
        "--store",
        str(tmp_path / "store"),
        check=True,
    )
    with fresh_database("bundles") as url:
        imported = json.loads(
            cli("cassettes", "import", str(bundle), "--store", url, "--json", check=True).stdout
        )
        assert imported["store"] == url.replace("replaykit:replaykit@", "replaykit@")
        report = json.loads(cli("replay", run["run_id"], "--store", url, "--json", check=True).stdout)
        assert report["identical"] and len(report["episodes"]) == len(run["episodes"])
        listed = cli("runs", "--json", env={"REPLAYKIT_STORE": url}, cwd=tmp_path, check=True).stdout
        assert run["run_id"] in listed  # $REPLAYKIT_STORE takes a URL as --store does
        store = open_store(url, readonly=True)
        assert store.count_cassettes() == len(run["cassettes"]) and store.index_rows("blobs", "hash")
        removed = json.loads(
            cli("cassettes", "rm", "-r", run["run_id"], "--store", url, "--json", check=True).stdout
        )
        assert removed["cassettes"] and removed["blobs"]
        cli("gc", "--store", url, "--json", check=True)
        assert (
            store.count_cassettes() == 0
            and store.list_runs() == []
            and store.index_rows("blobs", "hash") == []
        )


def test_doctor_checks_a_postgres_store_and_never_shows_its_password(tmp_path: Path) -> None:
    from tests.pg import fresh_database

    def store_check(location: str) -> dict[str, str]:
        proc = cli("doctor", "--store", location, "--json", cwd=tmp_path)
        assert "Traceback" not in proc.stderr and "secret-pw" not in proc.stdout + proc.stderr
        return next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "store")

    with fresh_database("doctor") as url:
        empty = store_check(url)
        assert empty["status"] == "warn" and "no store at" in empty["detail"]
        open_store(url).put_blob(b"x")  # the first write creates the tables
        assert store_check(url)["status"] == "ok"
        assert not open_store(url, readonly=True).list_runs()
    down = store_check("postgresql://someone:secret-pw@127.0.0.1:1/nothing")
    assert down["status"] == "fail" and "postgresql://someone@127.0.0.1:1/nothing" in down["detail"]


def test_view_serves_a_postgres_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``replaykit view``'s pages (listings, an episode, search, the change token) over a
    PostgreSQL store, read-only."""
    from starlette.testclient import TestClient

    from replaykit.view.app import create_app
    from tests.pg import fresh_database

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the search sidecar
    with fresh_database("view") as url:
        config = write_config(tmp_path, {"panel.seeds": [0], "store": url})
        run = json.loads(cli("run", str(config), "--json", cwd=tmp_path, check=True).stdout)
        store = open_store(url, readonly=True)
        with TestClient(create_app(store, poll_seconds=0), base_url="http://127.0.0.1") as client:
            for page in (
                "/",
                "/runs",
                f"/runs/{run['run_id']}",
                "/episodes",
                f"/episodes/{run['cassettes'][0]}",
            ):
                response = client.get(page)
                assert response.status_code == 200, (page, response.text[:300])
            assert run["run_id"][:12] in client.get("/runs").text
            assert client.get("/search", params={"q": "hello"}).status_code == 200
            token = client.get("/api/token").text
            open_store(url).put_blob(b"a change")  # another writer commits
            assert client.get("/api/token").text != token
