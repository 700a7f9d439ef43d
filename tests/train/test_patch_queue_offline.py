"""Patch-queue trainings replay offline: the diff texts live in the store (content-addressed)
and travel in bundles; diff paths resolve against the config file's folder, not the cwd."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from replaykit.episodes.config_paths import TEMPLATES
from replaykit.models.reference.proposer import CURRICULUM, ENTRY, unified_diff
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli as run_cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def cli(*args: str, cwd: Path) -> dict[str, Any]:
    proc = run_cli(
        *args,
        "--json",
        cwd=cwd,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def a_diff() -> str:
    source = (TEMPLATES / "quickstart" / "harness.py").read_text()
    change = next(c for c in CURRICULUM if c.path == ENTRY and c.search and c.search in source)
    return unified_diff(ENTRY, source, source.replace(change.search, change.replace))


def test_patch_queue_training_replays_from_elsewhere_and_after_a_bundle_import(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "patches").mkdir(parents=True)
    elsewhere.mkdir()
    (project / "patches" / "0001.diff").write_text(a_diff())
    config = write_config(
        project,
        {
            "panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")],
            "panel.seeds": [0],
            "train.epochs": 1,
            "train.estimator": {
                "kind": "patch_queue",
                "diffs": ["patches/0001.diff"],
                "descriptions": ["first patch"],
            },
        },
    )
    trained = cli("train", str(config), cwd=elsewhere)  # relative to the config file, not to the cwd
    assert trained["epochs"][0]["description"] == "first patch" and trained["epochs"][0]["candidate_sha"]
    shutil.rmtree(project / "patches")  # the diff files are gone: the store holds the texts
    store = str(project / "store")
    replay = cli("replay", trained["training_id"], "--store", store, cwd=elsewhere)
    assert replay["identical"] is True and replay["final_baseline"] == trained["final_baseline"]
    bundle = tmp_path / "training.tar.gz"
    cli("cassettes", "export", trained["training_id"], "-o", str(bundle), "--store", store, cwd=elsewhere)
    fresh = tmp_path / "fresh-store"
    cli("cassettes", "import", str(bundle), "--store", str(fresh), cwd=elsewhere)
    shutil.rmtree(project)  # nothing of the original project is left: no store, no repo, no diffs
    again = cli("replay", trained["training_id"], "--store", str(fresh), cwd=elsewhere)
    assert again["identical"] is True and again["final_baseline"] == trained["final_baseline"]
