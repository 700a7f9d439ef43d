"""`replaykit run` in Docker with the oracle model: the Harbor-shaped sample tasks are all
solved, replay identically with the engine unreachable, and certify deterministic; a run
of hostile tasks completes, each hostile episode an infra failure or a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replaykit.envs.docker import images
from replaykit.testing import write_config

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[3]
NEW_TASKS = ("env-greeting", "inventory-steps", "kv-service-client", "py-word-stats", "swe-median-bug")


def cli(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "replaykit.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(json.loads(proc.stdout))


def test_oracle_solves_the_new_sample_tasks_in_docker(docker_base: str, tmp_path: Path) -> None:
    from replaykit.envs.docker.flavours import build_python_image

    build_python_image()
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(REPO / "envs" / t) for t in NEW_TASKS],
            "panel.seeds": [0],
            "model.name": "reference-oracle",
        },
        base="quickstart-docker.yaml",
    )
    run = cli("run", str(config))
    assert run["total"] == len(NEW_TASKS) and run["solved"] == len(NEW_TASKS), run
    store = str(tmp_path / "store")
    replay = cli(
        "replay", run["run_id"], "--store", store, env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    )
    assert replay["identical"] is True and replay["divergence"] is None, replay
    cert = cli("certify", run["run_id"], "--store", store, "--tasks", str(REPO / "envs" / "*"))
    assert {t["task_id"]: t["status"] for t in cert["tasks"]} == dict.fromkeys(NEW_TASKS, "deterministic"), (
        cert
    )


HOSTILE = {
    "fork-bomb": "bomb() { bomb | bomb & }; bomb; sleep 60",
    "memory-hog": "python3 -c 'b = bytearray(600 * 1024 * 1024); print(len(b))'",
    "disk-filler": "for i in $(seq 1 60); do head -c 8M /dev/zero > big.$i; done",
    "sleeper": "sleep 600",
    "output-flood": "yes flood",
}


def test_hostile_tasks_do_not_abort_the_run(docker_base: str, tmp_path: Path) -> None:
    suite = tmp_path / "hostile"
    for name, command in HOSTILE.items():
        folder = suite / name
        for rel, text in {
            "task.toml": 'version = "2.0"\n[metadata]\ntags = []\n[verifier]\ntimeout_sec = 20\n[agent]\ntimeout_sec = 5\n'
            "[environment]\nmemory_mb = 128\nstorage_mb = 64\npids_limit = 64\n",
            "instruction.md": f"Hostile task {name}: survive it.\n",
            "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
            "tests/test.sh": 'mkdir -p "$LOGS_DIR/verifier"; echo 0 > "$LOGS_DIR/verifier/reward.txt"\n',
            "solution/solve.sh": f"#!/bin/bash\n{command}\n",
        }.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(suite / "*"), str(REPO / "envs" / "hello-file")],
            "panel.seeds": [0],
            "model.name": "reference-oracle",
            "env.timeout_sec": 4,
            "harness.params.max_steps": 2,
        },
        base="quickstart-docker.yaml",
    )
    run = cli("run", str(config))
    by_task = {e["task_id"]: e for e in run["episodes"]}
    assert set(by_task) == {*HOSTILE, "hello-file"} and by_task["hello-file"]["passed"], run
    store = str(tmp_path / "store")
    for name in HOSTILE:
        shown = cli("cassettes", "show", by_task[name]["cassette_id"], "--store", store)
        text = json.dumps(shown)
        assert by_task[name]["infra_failure"] or '"timed_out": true' in text, (name, text[:2000])
    for name in ("memory-hog", "disk-filler"):
        assert by_task[name]["infra_failure"], by_task[name]
    api = images.docker_client().api
    ids = {e["cassette_id"][:16] for e in run["episodes"]}
    left = [
        c["Names"][0]
        for c in api.containers(all=True, filters={"label": "replaykit=1"})
        if any(i in c["Names"][0] for i in ids)
    ]
    assert left == []
