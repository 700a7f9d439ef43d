"""``tasks check`` in Docker: an image alias every sample task uses is one note, said once,
not a warning per task (real warnings stay visible)."""

from __future__ import annotations

import json

import pytest

from replaykit.testing import project_root
from tests.cli_runner import cli

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

TASKS = ["hello-file", "fix-config-port"]


def test_an_image_alias_is_one_note_not_a_warning_per_task(docker_base: str) -> None:
    folders = [str(project_root() / "envs" / t) for t in TASKS]
    done = cli("tasks", "check", *folders, env={"COLUMNS": "80"}, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stdout, done.stdout
    notes = [line for line in done.stdout.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: FROM debian:bookworm-slim runs on {docker_base} (image alias) (every task)"], (
        done.stdout
    )
    assert done.stdout.rstrip().endswith("2/2 task(s) pass the oracle check")
    report = json.loads(cli("tasks", "check", *folders, "--json", timeout=900).stdout)
    assert report["warnings"] == 0 and all(r["warnings"] == [] for r in report["tasks"])
    assert report["notes"] == {f"FROM debian:bookworm-slim runs on {docker_base} (image alias)": TASKS}
