"""A run keeps the task folders it ran as store trees named by its document, so its bundles
carry them (deduplicated like any blob) and a receiver finds each task by its content; a bundle
whose task folder does not hold the content its name says is refused in one line, nothing
written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.envs.tasks import load_task
from replaykit.episodes.config import load_config
from replaykit.episodes.run import measure
from replaykit.exchange.bundle import export_bundle
from tests.cli_runner import cli
from tests.exchange.test_bundle import members_of, remanifest, write_tar

pytestmark = pytest.mark.e2e  # drives the CLI

REPO = Path(__file__).resolve().parents[2]
TASKS = [REPO / "envs" / "hello-file", REPO / "envs" / "count-error-lines"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("task-trees")
    cfg = load_config(
        REPO / "configs" / "quickstart.yaml",
        {
            "store": str(root / "store"),
            "harness.repo": str(root / "harness"),
            "panel.tasks": [str(t) for t in TASKS],
            "panel.seeds": [0],
        },
    )
    run = measure(cfg).run
    bundle = root / "run.tar.gz"
    export_bundle(Store(cfg.store_path), run.run_id, bundle)
    return {"root": root, "run": run, "bundle": bundle}


def test_a_run_names_its_task_folders_and_its_bundle_carries_them(recorded: dict[str, Any]) -> None:
    names = sorted(f"task-{load_task(t).digest}-{t.name}" for t in TASKS)
    assert sorted(recorded["run"].trees) == names
    members = {m.name: data for m, data in members_of(recorded["bundle"])}
    trees = {row["sha"]: json.loads(row["manifest"]) for row in json.loads(members["index/trees.json"])}
    assert set(names) <= set(trees)
    hello = trees[names[0] if "hello-file" in names[0] else names[1]]
    assert "hello-file/task.toml" in hello and all(p.startswith("hello-file/") for p in hello)


def test_a_bundle_whose_task_folder_is_not_its_digest_is_refused_and_nothing_written(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    members = members_of(recorded["bundle"])
    index = next(i for i, (m, _) in enumerate(members) if m.name == "index/trees.json")
    rows = json.loads(members[index][1])
    row = next(r for r in rows if r["sha"].endswith("-hello-file"))
    manifest = json.loads(row["manifest"])
    # the task's instruction now names another of its own files' blobs: every blob is present and
    # hashes to its name, the paths are safe; only the folder's content differs from its digest
    manifest["hello-file/instruction.md"][1] = manifest["hello-file/task.toml"][1]
    row["manifest"] = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
    members[index] = (members[index][0], json.dumps(rows).encode())
    forged = write_tar(tmp_path / "forged.tar.gz", remanifest(members))
    store = tmp_path / "store"
    proc = cli("cassettes", "import", str(forged), "--store", str(store))
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (
        "task hello-file's folder does not match its digest" in proc.stderr and "Traceback" not in proc.stderr
    )
    assert not (store / "index.db").exists()  # nothing written
