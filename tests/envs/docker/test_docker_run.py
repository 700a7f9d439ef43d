"""The quickstart panel in Docker: recorded with the reference model, replayed offline
with no Docker daemon and no sockets, snapshots, and runs killed mid-episode."""

from __future__ import annotations

import functools
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.keys import CassetteKey
from replaykit.cassette.store import Store
from replaykit.envs.docker import images, recipe
from replaykit.envs.docker.containers import OWNER_LABEL
from replaykit.episodes.config import load_config
from replaykit.episodes.replay import replay_run
from replaykit.episodes.run import measure
from tests.cli_runner import cli as run_cli
from tests.offline import cut_off

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[3]


cli = functools.partial(run_cli, check=True, cwd=REPO)


def test_quickstart_recorded_in_docker(docker_quickstart: dict[str, Any]) -> None:
    run, store = docker_quickstart["run"], docker_quickstart["store"]
    assert run["total"] == len(run["episodes"]) >= 16 and len(docker_quickstart["recorded"]) == run["total"]
    assert docker_quickstart["seconds"] < 240, (
        f"recording the quickstart in Docker took {docker_quickstart['seconds']:.0f}s"
    )
    images_by_task: dict[str, str] = {}
    for cassette_id in run["cassettes"]:
        key = CassetteKey.from_canonical(json.loads(store.cassette_row(cassette_id)["key_json"]))
        extra = dict(key.extra)
        assert extra["env"] == "docker" and extra["image"].startswith("recipe:")  # what, never where
        assert images_by_task.setdefault(key.task_id, extra["image"]) == extra["image"]  # one image per task
        episode = store.get_episode(cassette_id)
        assert episode.meta["env"]["kind"] == "docker"
        assert episode.env_events and all(len(e.state_digest) == 64 for e in episode.env_events)
    assert run["solved"] >= 1


def test_second_measure_reuses_every_cassette(docker_quickstart: dict[str, Any]) -> None:
    again = measure(load_config(docker_quickstart["config"]))
    assert again.recorded == [] and again.run.run_id == docker_quickstart["run"]["run_id"]


def test_replay_offline_with_no_docker_daemon_and_no_sockets(
    docker_quickstart: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = cut_off(monkeypatch)
    store = Store(docker_quickstart["tmp"] / "store")
    try:
        report = replay_run(store, docker_quickstart["run"]["run_id"])
    finally:
        store.close()
    assert report["identical"], report["divergence"]
    assert [e["replayed_digest"] for e in report["episodes"]] == [
        e["digest"] for e in docker_quickstart["run"]["episodes"]
    ]
    assert attempts == []


def test_cli_replay_with_the_daemon_unreachable(docker_quickstart: dict[str, Any]) -> None:
    proc = cli(
        "replay",
        docker_quickstart["run"]["run_id"],
        "--store",
        str(docker_quickstart["tmp"] / "store"),
        "--json",
        env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )
    assert json.loads(proc.stdout)["identical"] is True


def test_a_replay_only_run_builds_no_missing_image(
    docker_base: str, docker_config: Callable[..., Path], tmp_path: Path
) -> None:
    """``run --record-mode none`` (and a training's replay) derive each cassette key: with the
    engine up but a task's image gone, the key comes from the recording, and nothing is built."""
    import shutil
    import uuid

    task = tmp_path / "hello-unique"
    shutil.copytree(REPO / "envs" / "hello-file", task)
    (task / "environment" / "unique.txt").write_text(uuid.uuid4().hex)  # an image of this test's own
    config = docker_config(tmp_path, {"panel.tasks": [str(task)], "panel.seeds": [0]})
    recorded = json.loads(cli("run", str(config), "--json").stdout)
    (cassette,) = recorded["cassettes"]
    store = Store(tmp_path / "store")
    image = dict(CassetteKey.from_canonical(json.loads(store.cassette_row(cassette)["key_json"])).extra)[
        "image"
    ]
    store.close()
    client = images.docker_client()
    local = recipe.find_image(client, image)
    assert local is not None
    client.images.remove(local, force=True)
    replayed = cli("run", str(config), "--record-mode", "none", "--json")
    assert json.loads(replayed.stdout)["run_id"] == recorded["run_id"], replayed.stderr
    assert "replaying 1 task(s) with the env keys they were recorded with" in replayed.stderr, replayed.stderr
    assert "is not built on this machine" in replayed.stderr, replayed.stderr
    assert recipe.find_image(client, image) is None  # not rebuilt


def test_full_snapshots_are_stored_and_deterministic(
    docker_base: str, docker_config: Callable[..., Path], tmp_path: Path
) -> None:
    runs = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        config = docker_config(
            folder,
            {
                "env.snapshot": "full",
                "panel.seeds": [0],
                "panel.tasks": [str(REPO / "envs" / "hello-file"), str(REPO / "envs" / "organize-files")],
            },
        )
        runs.append((measure(load_config(config)).run, Store(folder / "store")))
    (run_a, store_a), (run_b, store_b) = runs
    assert [e.digest for e in run_a.episodes] == [e.digest for e in run_b.episodes]
    shown = json.loads(
        cli(
            "cassettes", "show", run_a.cassettes[0], "--store", str(tmp_path / "a" / "store"), "--json"
        ).stdout
    )
    env_events = [e for e in shown["events"] if e["kind"] == "env"]
    assert env_events and all(e["snapshot"] and len(e["snapshot"]) == 64 for e in env_events)
    human = cli("cassettes", "show", run_a.cassettes[0], "--store", str(tmp_path / "a" / "store")).stdout
    assert f"snapshot {env_events[0]['snapshot'][:12]}" in human
    for cid_a, cid_b in zip(run_a.cassettes, run_b.cassettes, strict=False):
        snaps_a = [e.snapshot for e in store_a.get_episode(cid_a).env_events]
        snaps_b = [e.snapshot for e in store_b.get_episode(cid_b).env_events]
        assert snaps_a == snaps_b
    import io
    import tarfile

    blob = store_a.get_blob(env_events[-1]["snapshot"])
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        assert any(n.startswith("app/") for n in tar.getnames())
    store_a.close()
    store_b.close()


# -- killed runs leave no container ----------------------------------------------------------


def _slow_task(folder: Path) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "solution").mkdir()
    (folder / "environment").mkdir()
    (folder / "task.toml").write_text('version = "2.0"\n[verifier]\ntimeout_sec = 10.0\n')
    (folder / "instruction.md").write_text("Wait for the slow service, then write ready.txt in /app.\n")
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (folder / "solution" / "solve.sh").write_text("#!/usr/bin/env bash\nsleep 60\ntouch ready.txt\n")
    (folder / "tests" / "test.sh").write_text(
        "mkdir -p $LOGS_DIR/verifier; [ -f $APP_DIR/ready.txt ] && echo 1 > $LOGS_DIR/verifier/reward.txt || echo 0 > $LOGS_DIR/verifier/reward.txt\n"
    )
    return folder


def _owned_by(pid: int) -> list[dict[str, Any]]:
    prefix = f"{socket.gethostname()}:{pid}:"
    found = images.docker_client().api.containers(all=True, filters={"label": "replaykit=1"})
    return [c for c in found if (c.get("Labels") or {}).get(OWNER_LABEL, "").startswith(prefix)]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_killed_run_leaves_no_container(
    docker_base: str, docker_config: Callable[..., Path], tmp_path: Path, sig: int, code: int
) -> None:
    from replaykit.models.reference.server import ReferenceServer

    task = _slow_task(tmp_path / "slow-task")
    with ReferenceServer(task_dirs=[task]) as server:
        config = docker_config(
            tmp_path,
            {
                "panel.tasks": [str(task)],
                "panel.seeds": [0],
                "env.timeout_sec": 120,
                "model.base_url": server.base_url,
                "model.name": "reference-oracle",
                "model.api_key_env": "",
            },
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "replaykit.cli", "run", str(config)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while not _owned_by(proc.pid):
                assert proc.poll() is None, (
                    f"the run ended before its container started: {proc.communicate()}"
                )
                assert time.monotonic() < deadline, "no container appeared"
                time.sleep(0.1)
            time.sleep(1.5)  # well inside the 60 s action
            assert _owned_by(proc.pid) and proc.poll() is None
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == code, err
    assert _owned_by(proc.pid) == []
