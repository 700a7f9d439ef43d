"""Under the frozen network the container's own traffic stays local (issue 31 item 3): a
solution that serves a file on the container's loopback and fetches it, with the proxy
variables set, scores 1 (it got the proxy's 502 when ``NO_PROXY`` was empty); nothing of
it is recorded as a network exchange."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaykit.envs.docker.network import server
from replaykit.testing import write_config
from tests.cli_runner import cli

pytestmark = [pytest.mark.docker, pytest.mark.e2e]
TASK = Path(__file__).resolve().parents[3] / "harbor" / "corpus" / "own-service"


def test_a_task_serving_itself_on_localhost_scores_1_under_the_frozen_network(
    docker_base: str, tmp_path: Path
) -> None:
    problem = server.check()
    if problem:
        pytest.fail(problem, pytrace=False)
    config = write_config(
        tmp_path,
        {"panel.tasks": [str(TASK)], "panel.seeds": [0], "model.name": "reference-oracle"},
        base="quickstart-docker.yaml",
    )
    run = json.loads(cli("run", str(config), "--json", cwd=tmp_path, check=True).stdout)
    (episode,) = run["episodes"]
    shown = json.loads(
        cli("cassettes", "show", episode["cassette_id"], "--store", str(tmp_path / "store"), "--json").stdout
    )
    assert shown["meta"]["environment"]["network"] == "frozen", shown["meta"]["environment"]
    assert episode["passed"] and episode["reward"] == 1, json.dumps(shown)[:3000]
    assert not [e for e in shown["events"] if e["kind"] == "net"]  # localhost never reached the proxy
