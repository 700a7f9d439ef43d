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
CORPUS = Path(__file__).resolve().parents[3] / "harbor" / "corpus"
TASK = CORPUS / "own-service"


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


def test_the_containers_loopback_address_stays_local_under_the_frozen_network(
    docker_base: str, tmp_path: Path
) -> None:
    """The corpus's entrypoint-service task: its image's ENTRYPOINT serves on 127.0.0.1:8080,
    its solution and verifier fetch ``http://127.0.0.1:8080``. Harbor scores the oracle 1; with
    ``NO_PROXY`` naming only ``localhost`` (d61bd2c) the fetch went to the proxy, 502, reward 0
    and main's differential went red."""
    if server.check():
        pytest.fail(server.check() or "", pytrace=False)
    checked = json.loads(
        cli("tasks", "check", str(CORPUS / "entrypoint-service"), "--json", cwd=tmp_path).stdout
    )
    (row,) = checked["tasks"]
    assert (row["solved"], row["ok"]) == (1, True), row


def _proxy_seeing_task(root: Path) -> Path:
    folder = root / "sees-the-proxy"
    for rel, text in {
        "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 60\n[environment]\nnetwork_mode = "public"\n',
        "instruction.md": "Create /app/done.\n",
        "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
        # reward 1 only where run would put it: behind the frozen network's proxy, its own traffic local
        "tests/test.sh": 'mkdir -p /logs/verifier; [ -f /app/done ] && [ "$HTTPS_PROXY" = http://replaykit-proxy:3128 ]'
        ' && case ",$NO_PROXY," in *,localhost,*) true ;; *) false ;; esac'
        " && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
        "solution/solve.sh": "touch /app/done\n",
    }.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def test_tasks_check_runs_under_runs_network_policy(docker_base: str, tmp_path: Path) -> None:
    """Issue 31 item 5: ``tasks check`` gives a networked task the frozen network, as ``run``
    does (it ran on the live network, so its verdict and run's differed); ``--network none``
    as ``env.network: none``."""
    if server.check():
        pytest.fail(server.check() or "", pytrace=False)
    task = _proxy_seeing_task(tmp_path)
    frozen = json.loads(cli("tasks", "check", str(task), str(TASK), "--json", cwd=tmp_path).stdout)
    assert [r["ok"] for r in frozen["tasks"]] == [True, True], frozen
    cut = json.loads(cli("tasks", "check", str(task), "--network", "none", "--json", cwd=tmp_path).stdout)
    assert cut["tasks"][0]["solved"] == 0, cut  # env.network: none, as run would: no proxy, no route
    bad = cli("tasks", "check", str(task), "--network", "open")
    assert bad.returncode == 2 and "--network" in bad.stderr


def test_names_the_task_maps_to_itself_stay_local_under_the_frozen_network(
    docker_base: str, tmp_path: Path
) -> None:
    """The corpus's hosts-blocklist task (dns-blacklisting's shape, issue 38 item 8): its
    ENTRYPOINT maps six names to 127.0.0.1/127.0.0.2 in /etc/hosts at run time, its own page
    answers them, its solution fetches each with the proxy variables set. Harbor scores the oracle
    1; each fetch went to the proxy (502) and it scored 0 until the container's /etc/hosts was
    read at the episode's start (and after its first action) and those names put in NO_PROXY."""
    if server.check():
        pytest.fail(str(server.check()), pytrace=False)
    proc = cli("tasks", "check", str(CORPUS / "hosts-blocklist"), "--json", cwd=tmp_path)
    (task,) = json.loads(proc.stdout)["tasks"]
    assert (task["untouched"], task["solved"]) == (0.0, 1.0), task
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(CORPUS / "hosts-blocklist")],
            "panel.seeds": [0],
            "model.name": "reference-oracle",
        },
        base="quickstart-docker.yaml",
    )
    run = json.loads(cli("run", str(config), "--json", cwd=tmp_path, check=True).stdout)
    (episode,) = run["episodes"]
    assert episode["passed"], episode
    shown = json.loads(
        cli("cassettes", "show", episode["cassette_id"], "--store", str(tmp_path / "store"), "--json").stdout
    )
    assert not [e for e in shown["events"] if e["kind"] == "net"]  # none of them reached the proxy


def test_loopback_names_are_read_from_an_etc_hosts_text() -> None:
    from replaykit.envs.docker.network.wiring import loopback_names

    hosts = "127.0.0.1\tlocalhost\n::1 ip6-localhost\n10.0.0.5 db\n127.0.0.2 a.invalid b.invalid # two\n# 127.0.0.9 c\nbad line\n"
    assert loopback_names(hosts) == ["localhost", "ip6-localhost", "a.invalid", "b.invalid"]
