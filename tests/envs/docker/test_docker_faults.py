"""Hostile tasks in Docker: each fault ends as that episode's infra failure or a timeout,
never as an exception out of the environment, and leaves no container behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replaykit.envs.docker import image_build, images
from replaykit.envs.docker.env import DockerEnv
from replaykit.envs.docker.faults import DEAD_EXIT_CODE
from replaykit.envs.output import TIMEOUT_EXIT_CODE
from replaykit.envs.tasks import Task, load_task

pytestmark = pytest.mark.docker

TOML = 'version = "2.0"\n[verifier]\ntimeout_sec = 20\n[environment]\ncpus = 1\nmemory_mb = {mem}\nstorage_mb = {storage}\npids_limit = {pids}\n'
TEST_SH = 'mkdir -p "$LOGS_DIR/verifier"; [ -f "$APP_DIR/done" ] && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0 > "$LOGS_DIR/verifier/reward.txt"\n'


def hostile_task(folder: Path, mem: int = 128, storage: int = 64, pids: int = 64) -> Task:
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "task.toml").write_text(TOML.format(mem=mem, storage=storage, pids=pids))
    (folder / "instruction.md").write_text("Survive.\n")
    (folder / "tests" / "test.sh").write_text(TEST_SH)
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    return load_task(folder)


@pytest.fixture(scope="module")
def hostile(docker_base: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, str]:
    task = hostile_task(tmp_path_factory.mktemp("hostile") / "hostile")
    return task, image_build.ensure_task_image(task).id


def gone(name: str) -> bool:
    return not images.docker_client().api.containers(all=True, filters={"name": name})


def test_fork_bomb_is_an_infra_failure_or_timeout(hostile: tuple[Task, str]) -> None:
    task, image = hostile
    with DockerEnv(task, image, timeout_sec=3, max_output_bytes=2000, episode="fork-bomb") as env:
        name = env.container.name
        obs = env.run("bomb() { bomb | bomb & }; bomb; sleep 30")
        assert obs.timed_out or obs.exit_code == DEAD_EXIT_CODE, obs
        grade = env.grade()
        assert grade.infra_failure or (obs.timed_out and not grade.passed), grade
    assert gone(name)


def test_memory_hog_is_an_infra_failure(hostile: tuple[Task, str]) -> None:
    task, image = hostile
    with DockerEnv(task, image, timeout_sec=20, episode="memory-hog") as env:
        name = env.container.name
        obs = env.run("python3 -c 'b = bytearray(400 * 1024 * 1024); print(len(b))'")
        assert (
            obs.exit_code == DEAD_EXIT_CODE and "ran out of memory" in obs.stderr and "128 MB" in obs.stderr
        ), obs
        again = env.run("touch done")
        assert again.exit_code == DEAD_EXIT_CODE and "the episode is stopped" in again.stderr
        grade = env.grade()
        assert grade.infra_failure and "out of memory" in grade.detail
        assert env.state_digest().startswith("dead:")
        assert limits(env)["memory_mb"] == 128
    assert gone(name)


def limits(env: DockerEnv) -> dict[str, Any]:
    found = env.metadata()["limits"]
    assert isinstance(found, dict)
    return found


def test_disk_filler_stops_at_the_storage_limit(hostile: tuple[Task, str]) -> None:
    task, image = hostile
    with DockerEnv(task, image, timeout_sec=30, episode="disk-filler") as env:
        name = env.container.name
        enforced = limits(env)["storage_enforced"]
        obs = env.run("for i in $(seq 1 40); do head -c 8M /dev/zero > big.$i; done; echo wrote")
        if enforced == "driver":
            assert obs.exit_code != 0
        else:
            assert enforced == "watchdog"
            assert obs.exit_code == DEAD_EXIT_CODE and "storage limit of 64 MB" in obs.stderr, obs
            assert env.grade().infra_failure
    assert gone(name)


def test_sleeper_times_out_and_the_episode_goes_on(hostile: tuple[Task, str]) -> None:
    task, image = hostile
    with DockerEnv(task, image, timeout_sec=2, episode="sleeper") as env:
        obs = env.run("sleep 600")
        assert obs.timed_out and obs.exit_code == TIMEOUT_EXIT_CODE
        assert env.run("touch done; echo ok").stdout == "ok\n"
        assert env.grade().passed


def test_output_flood_is_capped_and_times_out(hostile: tuple[Task, str]) -> None:
    task, image = hostile
    with DockerEnv(task, image, timeout_sec=2, max_output_bytes=1000, episode="flood") as env:
        obs = env.run("yes flood")
        assert obs.timed_out and len(obs.stdout.encode()) < 1200 and "truncated at 1000 bytes" in obs.stdout


def test_container_death_between_actions_is_an_infra_failure(hostile: tuple[Task, str]) -> None:
    task, image = hostile
    with DockerEnv(task, image, timeout_sec=5, episode="killed") as env:
        name = env.container.name
        images.docker_client().api.kill(env.container.id)  # PID 1 killed from outside
        obs = env.run("touch done")
        assert obs.exit_code == DEAD_EXIT_CODE and "the container stopped" in obs.stderr
        grade = env.grade()
        assert grade.infra_failure and "the container stopped" in grade.detail
    assert gone(name)


def test_verifier_crash_is_an_infra_failure(docker_base: str, tmp_path: Path) -> None:
    task = hostile_task(tmp_path / "crash")
    (task.path / "tests" / "test.sh").write_text("kill -SEGV $$\n")
    task = load_task(task.path)
    with DockerEnv(
        task, image_build.ensure_task_image(task).id, timeout_sec=5, episode="verifier-crash"
    ) as env:
        grade = env.grade()
    assert grade.infra_failure and "no reward.txt or reward.json" in grade.detail
