"""``doctor``, ``cassettes rm`` and ``gc`` through the real CLI."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.stores import open_store
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def ok_json(*args: str, cwd: Path) -> Any:
    proc = cli(*args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def small(tmp_path: Path, **overrides: Any) -> Path:
    tasks = [str(REPO_ROOT / "envs" / t) for t in ("hello-file", "fix-config-port")]
    return write_config(tmp_path, {"panel.tasks": tasks, "panel.seeds": [0], **overrides})


def counts(store: Path, cwd: Path) -> tuple[int, int]:
    return len(ok_json("runs", "--store", str(store), cwd=cwd)), len(
        ok_json("cassettes", "ls", "--store", str(store), cwd=cwd)
    )


def test_rm_refuses_referenced_and_recursive_keeps_what_others_need(tmp_path: Path) -> None:
    config, store = small(tmp_path), tmp_path / "store"
    training = ok_json("train", str(config), "--epochs", "2", cwd=tmp_path)
    kept = ok_json("run", str(config), "--model", "reference-strong", cwd=tmp_path)
    before = counts(store, tmp_path)

    baseline_run = training["epochs"][0]["baseline_run"]
    refused = cli("cassettes", "rm", baseline_run[:6], "--store", str(store), cwd=tmp_path)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    # the referring documents are listed sorted by id (a verdict and the training; ids
    # depend on the tmp paths in the config), so look for the training's id, not an order
    assert refused.stderr.count("\n") == 1 and "is referenced by" in refused.stderr
    assert (
        f"training {training['training_id'][:6]}" in refused.stderr
        or training["training_id"] in refused.stderr
    )
    assert counts(store, tmp_path) == before

    dry = ok_json(
        "cassettes", "rm", training["training_id"], "-r", "--dry-run", "--store", str(store), cwd=tmp_path
    )
    assert counts(store, tmp_path) == before  # a dry run changes nothing
    assert kept["run_id"] not in {r["id"] for r in dry["runs"]}
    assert not set(kept["cassettes"]) & set(dry["cassettes"])
    assert {r["kind"] for r in dry["runs"]} == {"training", "verdict", "measure"}

    done = ok_json("cassettes", "rm", training["training_id"], "-r", "--store", str(store), cwd=tmp_path)
    assert (
        done["runs"] == dry["runs"]
        and done["cassettes"] == dry["cassettes"]
        and done["blobs"] == dry["blobs"] > 0
    )
    assert counts(store, tmp_path) == (before[0] - len(dry["runs"]), before[1] - len(dry["cassettes"]))
    gone = cli("replay", training["training_id"], "--store", str(store), cwd=tmp_path)
    assert gone.returncode == 1 and "Error:" in gone.stderr

    # what was kept is whole: it replays identically, exports, and gc finds nothing more to remove
    assert ok_json("replay", kept["run_id"], "--store", str(store), cwd=tmp_path)["identical"]
    assert (
        cli(
            "cassettes",
            "export",
            kept["run_id"],
            "-o",
            str(tmp_path / "k.tar.gz"),
            "--store",
            str(store),
            cwd=tmp_path,
        ).returncode
        == 0
    )
    assert ok_json("gc", "--store", str(store), cwd=tmp_path)["blobs"] == 0


def test_gc_removes_only_unreferenced_blobs(tmp_path: Path) -> None:
    config, store = small(tmp_path), tmp_path / "store"
    ok_json("train", str(config), "--epochs", "1", cwd=tmp_path)
    ok_json(
        "train", str(config), "--epochs", "2", cwd=tmp_path
    )  # rewrites the training document (the version it replaces goes: test_replaced_documents.py)
    orphan = open_store(store)
    orphan.put_blob(b"nothing names this blob")  # garbage
    orphan.close()
    before = counts(store, tmp_path)
    dry = ok_json("gc", "--dry-run", "--store", str(store), cwd=tmp_path)
    assert dry["blobs"] == 1 and dry["runs"] == [] and dry["cassettes"] == []
    assert ok_json("gc", "--store", str(store), cwd=tmp_path)["blobs"] == dry["blobs"]
    assert counts(store, tmp_path) == before
    assert ok_json("gc", "--store", str(store), cwd=tmp_path)["blobs"] == 0
    for doc in ok_json("runs", "--store", str(store), cwd=tmp_path):
        assert (
            cli(
                "cassettes",
                "export",
                doc["id"],
                "-o",
                str(tmp_path / f"{doc['id']}.tgz"),
                "--store",
                str(store),
                cwd=tmp_path,
            ).returncode
            == 0
        )


def test_gc_without_a_store_creates_none(tmp_path: Path) -> None:
    proc = cli("gc", "--store", str(tmp_path / "nothing"), cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: no store")
    assert not (tmp_path / "nothing").exists()


def test_doctor(tmp_path: Path) -> None:
    config = small(tmp_path)
    ok_json("run", str(config), cwd=tmp_path)
    report = ok_json("doctor", str(config), cwd=tmp_path)
    status = {c["name"]: c["status"] for c in report["checks"]}
    assert {"docker engine", "base image", "store", "harness repo", "endpoint", "api key"} <= set(status)
    assert status["store"] == status["harness repo"] == status["endpoint"] == "ok"

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "b" / "harness").mkdir(parents=True)  # a folder, but no git repo with harness.py
    broken = small(
        tmp_path / "b",
        **{
            "model.base_url": f"http://127.0.0.1:{port}/v1",
            "model.api_key_env": "REPLAYKIT_NO_SUCH_KEY",
            "harness.template": None,
        },
    )
    proc = cli("doctor", str(broken), cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = {line.split(":")[0].split()[-1]: line for line in proc.stdout.splitlines() if ":" in line}
    assert lines["endpoint"].startswith("FAIL") and "fix:" in lines["endpoint"]
    assert lines["repo"].startswith("FAIL") and "harness.py" in lines["repo"]
    assert lines["key"].startswith("FAIL") and "REPLAYKIT_NO_SUCH_KEY" in lines["key"]


def test_doctor_says_one_fix_per_line_and_only_one_that_applies(tmp_path: Path) -> None:
    """No Docker engine, a local config: the engine line's fix does not suggest env.kind: local
    (it is), and the base image line does not repeat the engine's fix."""
    config = small(tmp_path)
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock", "COLUMNS": "200"}
    proc = cli("doctor", str(config), cwd=tmp_path, env=env, process=True)
    lines = {row.split(":")[0].split(None, 1)[-1]: row for row in proc.stdout.splitlines() if ":" in row}
    engine, base = lines["docker engine"], lines["base image"]
    assert engine.startswith("warn") and "env.kind is local" in engine and engine.count("env.kind") == 1, (
        engine
    )
    assert engine.endswith("— fix: start the Docker daemon (scripts/setup-docker.sh)"), engine
    assert base.startswith("warn") and "fix:" not in base and "unknown until the engine answers" in base, base
    assert all(row.count("fix:") <= 1 for row in proc.stdout.splitlines())
