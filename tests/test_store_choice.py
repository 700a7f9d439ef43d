"""Ids find their store: run/train say where they stored; replay, certify, audit, report and
cassettes take --config CFG (its store) and honour $REPLAYKIT_STORE; an id not found names
the stores that were looked in."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e


def test_replay_and_friends_find_a_run_in_the_configs_non_default_store(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, {"panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")], "panel.seeds": [0]}
    )
    store = str(tmp_path / "store")  # not ./cassettes
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "REPLAYKIT_STORE"}
    text = cli("run", str(config), cwd=elsewhere, env=env, check=True)
    assert f"stored in {store}" in text.stdout and "--config" in text.stdout
    run = json.loads(cli("run", str(config), "--json", cwd=elsewhere, env=env, check=True).stdout)
    assert run["store"] == store
    run_id = run["run_id"]

    lost = cli("replay", run_id, "--json", cwd=elsewhere, env=env)
    assert lost.returncode == 1 and len(lost.stderr.strip().splitlines()) == 1
    assert "looked in cassettes (the default ./cassettes)" in lost.stderr and "--config CFG" in lost.stderr

    found = cli("replay", run_id, "--config", str(config), "--json", cwd=elsewhere, env=env, check=True)
    assert json.loads(found.stdout)["identical"]
    by_env = cli("replay", run_id, "--json", cwd=elsewhere, env={**env, "REPLAYKIT_STORE": store}, check=True)
    assert json.loads(by_env.stdout)["identical"]
    for args in (
        ["certify", run_id],
        ["runs"],
        ["cassettes", "ls"],
        ["report", run_id, "-o", str(tmp_path / "r.html")],
    ):
        cli(*args, "--config", str(config), "--json", cwd=elsewhere, env=env, check=True)

    wrong = cli("cassettes", "show", "0000dead", "--config", str(config), cwd=elsewhere, env=env)
    assert wrong.returncode == 1 and f"looked in {store} (the store of --config {config})" in wrong.stderr
