"""``run --override-cpus/--override-memory-mb/--timeout-multiplier`` in Docker: the container
gets the overridden limits (its episode says so), and the limits are part of the key: the
same panel without them is recorded apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaykit.testing import write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[3]


def test_resource_overrides_reach_the_container(docker_base: str, tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(REPO / "envs" / "hello-file")],
            "panel.seeds": [0],
            "model.name": "reference-oracle",
        },
        base="quickstart-docker.yaml",
    )
    flags = ("--override-cpus", "0.5", "--override-memory-mb", "300", "--timeout-multiplier", "2")
    run = json.loads(cli("run", str(config), *flags, "--json", cwd=tmp_path, check=True).stdout)
    (episode,) = run["episodes"]
    assert episode["passed"], run
    shown = json.loads(
        cli(
            "cassettes",
            "show",
            episode["cassette_id"],
            "--store",
            str(tmp_path / "store"),
            "--json",
            check=True,
        ).stdout
    )
    limits = shown["meta"]["environment"]["limits"]
    assert (limits["cpus"], limits["memory_mb"]) == (0.5, 300), limits
    plain = json.loads(cli("run", str(config), "--json", cwd=tmp_path, check=True).stdout)
    assert plain["recorded_count"] == 1 and plain["episodes"][0]["cassette_id"] != episode["cassette_id"]
    other = cli(
        "cassettes", "show", plain["episodes"][0]["cassette_id"], "--store", str(tmp_path / "store"), "--json"
    )
    assert json.loads(other.stdout)["meta"]["environment"]["limits"]["memory_mb"] == 512  # task.toml's own
