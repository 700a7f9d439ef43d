"""The verifier's output is captured whole in Docker (issue 29: grade details sometimes lost
the verifier's last line, so identical behaviour got another digest). The process writes its
stdout and stderr to files in the container, read back once it ended; an engine that stops
answering about a running process is never taken for "it finished"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.envs.docker import image_build
from replaykit.envs.docker.env import DockerEnv
from replaykit.envs.tasks import Task, load_task

pytestmark = pytest.mark.docker

TOML = 'version = "2.0"\n[verifier]\ntimeout_sec = 30\n[environment]\ncpus = 1\nmemory_mb = 256\nallow_internet = false\n'
TEST_SH = (
    'mkdir -p "$LOGS_DIR/verifier"\n'
    'for i in 1 2 3; do echo "line $i"; sleep 0.2; done\n'
    'echo 1 > "$LOGS_DIR/verifier/reward.txt"\n'
    "echo 'the summary' >&2\n"
    "echo 'LAST LINE'\n"
)


@pytest.fixture(scope="module")
def task(docker_base: str, tmp_path_factory: pytest.TempPathFactory) -> Task:
    folder = tmp_path_factory.mktemp("verifier-output") / "t"
    (folder / "tests").mkdir(parents=True)
    (folder / "environment").mkdir()
    (folder / "task.toml").write_text(TOML)
    (folder / "instruction.md").write_text("Nothing to do.\n")
    (folder / "tests" / "test.sh").write_text(TEST_SH)
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    return load_task(folder)


@pytest.fixture
def env(task: Task) -> Iterator[DockerEnv]:
    with DockerEnv(task, image_build.ensure_task_image(task).id, episode="verifier-output") as docker_env:
        yield docker_env


def test_the_grade_detail_holds_the_whole_output(env: DockerEnv) -> None:
    grade = env.grade()
    assert grade.passed and grade.detail.endswith("line 1\nline 2\nline 3\nLAST LINE\nthe summary"), (
        grade.detail
    )
    again = env.grade()
    assert again == grade  # the same behaviour, the same grade (and digest)


def test_a_stream_cut_short_loses_nothing_of_the_verifiers_output(
    env: DockerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exec stream delivers its first frame only (the rest never arrives in time, as
    from an engine slow after a restart): the grade still has every line."""
    from docker.utils import socket as docker_socket

    real = docker_socket.frames_iter

    def first_frame_only(sock: Any, tty: bool) -> Iterator[Any]:
        for frame in real(sock, tty):
            yield frame
            return

    whole = env.grade().detail
    monkeypatch.setattr(docker_socket, "frames_iter", first_frame_only)
    grade = env.grade()
    assert grade.passed and grade.detail == whole and "LAST LINE" in grade.detail, grade.detail


def test_an_engine_that_does_not_answer_for_a_moment_is_not_a_finished_process(
    env: DockerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three inspections of the running verifier fail (the engine busy, restarting): it is
    asked again, not killed as if it had finished (its last lines and reward came after)."""
    whole = env.grade().detail
    api = env._require_started().client.api
    real = api.exec_inspect
    failures = {"left": 3}

    def flaky(exec_id: str) -> Any:
        info = real(exec_id)
        if info.get("Running") and failures["left"]:
            failures["left"] -= 1
            raise ConnectionError("engine busy")
        return info

    monkeypatch.setattr(api, "exec_inspect", flaky)
    grade = env.grade()
    assert failures["left"] == 0 and grade.passed and grade.detail == whole, grade.detail


def test_an_engine_that_never_answers_again_is_an_infra_failure(
    env: DockerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = env._require_started().client.api

    def gone(exec_id: str) -> Any:
        raise ConnectionError("engine gone")

    monkeypatch.setattr(api, "exec_inspect", gone)
    grade = env.grade()
    assert grade.infra_failure and not grade.passed and "stopped answering" in grade.detail, grade.detail


def test_the_output_files_are_where_harbor_keeps_its_verifier_output(env: DockerEnv) -> None:
    env.grade()
    stdout = env.download_file("/logs/verifier/test-stdout.txt", 1 << 20)
    assert stdout == b"line 1\nline 2\nline 3\nLAST LINE\n"
    assert env.download_file("/logs/verifier/test-stderr.txt", 1 << 20) == b"the summary\n"
    path = Path("/logs/verifier/nothing-here")
    assert env.download_file(str(path), 10) is None
