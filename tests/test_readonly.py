"""Reading never writes: replay (runs and trainings), audit, listings and export leave
the store byte-identical; read-only commands never create a store; ``created_at`` is
set once, so the same run exports to the same bytes and a second import is a no-op."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.core.errors import HarnessError
from replaykit.core.modes import RecordMode
from replaykit.episodes.run import measure
from replaykit.exchange.bundle import export_bundle
from replaykit.exchange.importer import import_bundle
from replaykit.testing import small_config
from replaykit.train.trainer import Trainer
from tests.cli_runner import cli as run_cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


TASKS = ["hello-file", "fix-config-port"]


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=600, cwd=cwd)


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under a store folder (index.db, its WAL files if any, cache/)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("readonly")
    cfg = small_config(tmp, tasks=TASKS, seeds=[0], **{"model.name": "reference-weak", "env.timeout_sec": 22})
    trainer = Trainer(config=cfg)
    for loss in trainer.epochs(2):
        loss.backward()
        trainer.optimizer.step()
    trainer.store.close()
    summary = trainer.summary().to_json()  # as stored
    return {"tmp": tmp, "cfg": cfg, "summary": summary, "store": Path(cfg.store_path)}


def test_read_only_commands_leave_the_store_byte_identical(trained: dict[str, Any], tmp_path: Path) -> None:
    store, summary = str(trained["store"]), trained["summary"]
    run_id, training_id = summary["runs"][0], summary["training_id"]
    verdicts = summary["verdicts"]
    assert verdicts, "the training recorded no verdict"
    cassette = json.loads(cli("cassettes", "ls", "--run", run_id, "--store", store, "--json").stdout)[0]["id"]
    before = snapshot(trained["store"])
    commands = [
        ("replay", run_id),
        ("replay", training_id),
        ("audit", verdicts[0]),
        ("audit", verdicts[0], "--criterion", "mean_reward"),
        ("runs",),
        ("cassettes", "ls"),
        ("cassettes", "ls", "--run", run_id),
        ("cassettes", "show", cassette),
        ("cassettes", "export", training_id, "-o", str(tmp_path / "t.tgz")),
        ("cassettes", "export", run_id, "-o", str(tmp_path / "r.tar")),
        ("cassettes", "export", run_id, "--format", "vcr", "-o", str(tmp_path / "vcr")),
        ("cassettes", "verify", str(tmp_path / "t.tgz"), "--store", store),
    ]
    for args in commands:
        extra = () if args[0] == "cassettes" and args[1] == "verify" else ("--store", store)
        out = cli(*args, *extra, "--json")
        assert out.returncode == 0, f"{args}: {out.stderr}"
        assert snapshot(trained["store"]) == before, f"`replaykit {' '.join(args)}` changed the store"
    # replaying one of the training's runs against another ref of the harness repo works
    repo = str(trained["cfg"].repo_path)
    run = json.loads(
        cli(
            "replay",
            run_id,
            "--store",
            store,
            "--harness",
            summary["final_baseline"],
            "--harness-repo",
            repo,
            "--json",
        ).stdout
        or "{}"
    )
    assert run.get("replayed_harness_sha") == summary["final_baseline"], run
    assert snapshot(trained["store"]) == before


@pytest.mark.parametrize(
    "args",
    [
        ("replay", "abcdef123456"),
        ("audit", "abcdef123456"),
        ("runs",),
        ("cassettes", "ls"),
        ("cassettes", "show", "abcdef123456"),
        ("cassettes", "export", "abcdef123456"),
    ],
)
def test_read_only_commands_on_a_missing_store_create_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    out = cli(*args, "--store", str(tmp_path / "typo"), cwd=tmp_path)
    assert (
        out.returncode == 1
        and out.stderr.startswith("Error: no store at ")
        and len(out.stderr.strip().splitlines()) == 1
    ), out.stderr
    assert sorted(os.listdir(tmp_path)) == []


def test_created_at_is_set_once_and_exports_are_stable(trained: dict[str, Any], tmp_path: Path) -> None:
    cfg, run_id = trained["cfg"], trained["summary"]["runs"][0]
    first = tmp_path / "a.tar.gz"
    export_bundle(Store(cfg.store_path, readonly=True), run_id, first)
    store = Store(cfg.store_path)
    created = {r["id"]: r["created_at"] for r in store.list_runs()}
    cassettes = {r["id"]: r["created_at"] for r in store.list_cassettes()}
    measure(cfg, store=store)  # re-measured from cassettes: every episode reused
    store.put_run(store.get_run(run_id))  # rewritten with the same content
    assert {r["id"]: r["created_at"] for r in store.list_runs()} == created
    assert {r["id"]: r["created_at"] for r in store.list_cassettes()} == cassettes
    store.close()
    second = tmp_path / "b.tar.gz"
    export_bundle(Store(cfg.store_path, readonly=True), run_id, second)
    assert first.read_bytes() == second.read_bytes()
    target = Store(tmp_path / "target")
    assert not import_bundle(target, first)["noop"]
    assert import_bundle(target, second)["noop"]


def test_record_mode_none_never_materialises_a_mistyped_harness_repo(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    cfg = trained["cfg"]
    typo = cfg.model_copy(
        update={"harness": cfg.harness.model_copy(update={"repo": str(tmp_path / "harnes")})}
    )
    with pytest.raises(HarnessError, match="does not exist; record mode none never creates one"):
        measure(typo, record_mode=RecordMode.NONE)
    assert not (tmp_path / "harnes").exists()
