"""DockerEnv against a real engine: pins, limits, timeouts, caps, state digests,
snapshots, grading, image cache and aliases, container cleanup."""

from __future__ import annotations

import io
import os
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from replaykit.core.determinism import ENV_PINS
from replaykit.core.errors import EnvError
from replaykit.envs.docker import image_build, images
from replaykit.envs.docker.containers import (
    EPISODE_LABEL,
    LABEL,
    OWNER_LABEL,
    owner_id,
    remove_stale_containers,
)
from replaykit.envs.docker.env import DockerEnv
from replaykit.envs.output import TIMEOUT_EXIT_CODE, truncation_marker
from replaykit.envs.tasks import Task, load_task

pytestmark = pytest.mark.docker

TOML = 'version = "2.0"\n[verifier]\ntimeout_sec = {vt}\n[environment]\ncpus = 1\nmemory_mb = 256\nallow_internet = false\n'
PASS_IF_DONE = 'mkdir -p "$LOGS_DIR/verifier"\n[ -f "$APP_DIR/done" ] && r=1 || r=0\necho $r > "$LOGS_DIR/verifier/reward.txt"\necho checked\n'


def make_task(
    folder: Path,
    test_sh: str = PASS_IF_DONE,
    dockerfile: str = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY files/ /app/\n",
    files: dict[str, str] | None = None,
    verifier_timeout: float = 20,
) -> Task:
    (folder / "tests").mkdir(parents=True)
    (folder / "environment" / "files").mkdir(parents=True)
    (folder / "task.toml").write_text(TOML.format(vt=verifier_timeout))
    (folder / "instruction.md").write_text("Create done.\n")
    (folder / "tests" / "test.sh").write_text(test_sh)
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    for rel, text in (files or {"a.txt": "alpha\n", "sub/b.txt": "beta\n"}).items():
        path = folder / "environment" / "files" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return load_task(folder)


@pytest.fixture(scope="module")
def task(docker_base: str, tmp_path_factory: pytest.TempPathFactory) -> Task:
    return make_task(tmp_path_factory.mktemp("docker-task") / "t")


@pytest.fixture(scope="module")
def image(task: Task) -> str:
    return image_build.ensure_task_image(task).id


@pytest.fixture
def env(task: Task, image: str) -> Iterator[DockerEnv]:
    with DockerEnv(task, image, timeout_sec=10, max_output_bytes=1000, episode="test") as docker_env:
        yield docker_env


def test_pins_workdir_and_starting_files(env: DockerEnv) -> None:
    obs = env.run(
        'pwd; hostname; cat a.txt sub/b.txt; echo "$APP_DIR $TESTS_DIR $LOGS_DIR"; ls -d /tests /logs'
    )
    assert obs.exit_code == 0 and not obs.timed_out
    assert obs.stdout == "/app\nreplaykit\nalpha\nbeta\n/app /tests /logs\n/logs\n/tests\n"
    env_out = env.run("env").stdout
    for name, value in ENV_PINS.items():
        assert f"{name}={value}\n" in env_out


def test_limits_and_no_network(env: DockerEnv) -> None:
    host = env.container.client.api.inspect_container(env.container.id)["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["Memory"] == 256 * 1024 * 1024
    assert host["NanoCpus"] == 1_000_000_000
    assert env.run("ls /sys/class/net").stdout.split() == ["lo"]
    labels = env.container.labels
    assert labels[LABEL] == "1" and labels[EPISODE_LABEL] == "test" and labels[OWNER_LABEL] == owner_id()


def test_exit_codes_stderr_and_output_caps(env: DockerEnv) -> None:
    obs = env.run("echo out; echo err >&2; exit 3")
    assert (obs.stdout, obs.stderr, obs.exit_code) == ("out\n", "err\n", 3)
    big = env.run("head -c 5000 /dev/zero | tr '\\0' a; head -c 3000 /dev/zero | tr '\\0' b >&2")
    assert big.stdout == "a" * 1000 + truncation_marker("stdout", 1000)
    assert big.stderr == "b" * 1000 + truncation_marker("stderr", 1000)


def test_timeout_kills_the_action_and_the_background_runs_until_the_verifier(env: DockerEnv) -> None:
    """A timed-out action is killed with what descends from it; what an action leaves in the
    background runs on, as in Harbor (never waited for, its later output nobody's), until the
    verifier has run; then only PID 1 is left."""
    start = time.monotonic()
    obs = env.run("echo started; sleep 30", timeout_sec=1)
    assert time.monotonic() - start < 6
    assert obs.exit_code == TIMEOUT_EXIT_CODE and obs.timed_out and obs.stdout == "started\n"
    start = time.monotonic()
    left = env.run("(sleep 1; echo late; exec sleep 300) & echo $!")
    pid = left.stdout.strip()
    assert pid.isdigit() and time.monotonic() - start < 3, left  # not waited for
    time.sleep(1.5)
    assert env.run(f"kill -0 {pid} && echo alive").stdout == "alive\n"  # "late" went to no observation
    assert len(env.run("echo /proc/[0-9]*").stdout.split()) == 3  # PID 1, the sleep, this bash
    env.grade()
    for _ in range(3):  # the glob runs in this bash: PID 1 and itself, every time
        assert len(env.run("echo /proc/[0-9]*").stdout.split()) == 2


def test_silent_action_outlasts_the_api_timeout(env: DockerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env.container.client.api, "timeout", 1)  # the stream must not time out
    obs = env.run("sleep 2.5; echo done")
    assert (obs.stdout, obs.exit_code, obs.timed_out) == ("done\n", 0, False)


def test_state_digest_tracks_changes_not_reads(task: Task, image: str) -> None:
    digests = []
    for _ in range(2):
        with DockerEnv(task, image) as env:
            first = env.state_digest()
            env.run("cat a.txt; ls -la")
            same = env.state_digest()
            env.run("echo new > c.txt && rm sub/b.txt && mkdir -p /tmp/x && echo y > /tmp/x/y")
            changed = env.state_digest()
            digests.append((first, same, changed))
    (first, same, changed), second_run = digests
    assert first == same != changed
    assert second_run == digests[0]  # identical runs, identical digests


def test_full_snapshot_is_a_normalised_tar(task: Task, image: str) -> None:
    blobs = []
    for _ in range(2):
        with DockerEnv(task, image, snapshot_mode="full") as env:
            env.run("echo hi > greeting.txt && rm sub/b.txt && echo t > /tmp/t")
            data = env.snapshot_bytes()
            assert data is not None
            blobs.append(data)
    assert blobs[0] == blobs[1]
    with tarfile.open(fileobj=io.BytesIO(blobs[0])) as tar:
        names = tar.getnames()
        assert {"app/a.txt", "app/greeting.txt", "tmp/t"} <= set(names)
        assert "app/sub/b.txt" not in names
        assert all(m.mtime == int(ENV_PINS["SOURCE_DATE_EPOCH"]) and m.uid == 0 for m in tar.getmembers())
        deleted = tar.extractfile(".replaykit/deleted.txt").read().decode()  # type: ignore[union-attr]
        assert "/app/sub/b.txt" in deleted.splitlines()
    with DockerEnv(task, image) as env:
        assert env.snapshot_bytes() is None  # digest mode stores no snapshot


def test_grade_pass_fail_and_stale_reward(env: DockerEnv) -> None:
    env.run("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt")  # planted: must not count
    failed = env.grade()
    assert (failed.reward, failed.passed, failed.infra_failure) == (0.0, False, False)
    assert failed.detail.startswith("reward 0 from reward.txt (verifier exit 0); checked")
    env.run("touch done")
    passed = env.grade()
    assert (passed.reward, passed.passed) == (1.0, True)


@pytest.mark.parametrize(
    ("test_sh", "reward", "infra", "detail"),
    [
        (
            "mkdir -p $LOGS_DIR/verifier; echo '{\"reward\": 0.5}' > $LOGS_DIR/verifier/reward.json",
            0.5,
            False,
            "reward 0.5 from reward.json",
        ),
        ("echo nothing written", 0.0, True, "the verifier wrote no reward.txt or reward.json"),
        (
            "mkdir -p $LOGS_DIR/verifier; echo yes > $LOGS_DIR/verifier/reward.txt",
            0.0,
            True,
            "reward.txt is not a number",
        ),
        ("sleep 30", 0.0, True, "verifier timed out after 1 s"),
    ],
)
def test_grade_semantics_match_local(
    docker_base: str, tmp_path: Path, test_sh: str, reward: float, infra: bool, detail: str
) -> None:
    task = make_task(tmp_path / "t", test_sh=test_sh, verifier_timeout=1)
    with DockerEnv(task, image_build.ensure_task_image(task).id) as env:
        grade = env.grade()
    assert (grade.reward, grade.infra_failure) == (reward, infra)
    assert detail in grade.detail


def test_close_removes_the_container_and_start_recreates(task: Task, image: str) -> None:
    env = DockerEnv(task, image)
    env.start()
    first = env.container.name
    env.run("touch done")
    env.start()  # a fresh container: the file is gone
    second = env.container.name
    assert first != second and env.run("test -e done").exit_code == 1
    env.close()
    env.close()  # idempotent
    names = [n.lstrip("/") for c in images.docker_client().api.containers(all=True) for n in c["Names"]]
    assert first not in names and second not in names
    with pytest.raises(EnvError, match="not started"):
        env.run("true")


def test_stale_containers_of_dead_owners_are_removed(image: str) -> None:
    client = images.docker_client()
    dead_owner = f"{owner_id().split(':')[0]}:999999999:0"
    alive = client.containers.create(image, command=["true"], labels={LABEL: "1", OWNER_LABEL: owner_id()})
    created = [alive]
    try:
        # Every replaykit process sweeps at its start: another xdist worker's CLI may remove the
        # dead owner's container first. Then this call did not, and the test tries again.
        for _ in range(5):
            dead = client.containers.create(
                image, command=["true"], labels={LABEL: "1", OWNER_LABEL: dead_owner}
            )
            created.append(dead)
            removed = remove_stale_containers()
            assert alive.id[:12] not in removed
            left = [c["Id"] for c in client.api.containers(all=True)]
            assert dead.id not in left and alive.id in left
            if dead.id[:12] in removed:
                break
        else:
            pytest.fail("remove_stale_containers never removed the dead owner's container itself")
    finally:
        for c in created:
            client.api.remove_container(c.id, force=True) if c.id in [
                x["Id"] for x in client.api.containers(all=True)
            ] else None


def test_image_cache_and_rebuild_on_change(docker_base: str, tmp_path: Path) -> None:
    task = make_task(tmp_path / "t")
    first = image_build.ensure_task_image(task)
    again = image_build.ensure_task_image(load_task(tmp_path / "t"))
    assert (again.id, again.tag, again.built) == (first.id, first.tag, False)
    assert first.tag.startswith("replaykit-task/t:")
    (tmp_path / "t" / "environment" / "files" / "a.txt").write_text("changed\n")
    changed = image_build.ensure_task_image(load_task(tmp_path / "t"))
    assert changed.id != first.id and changed.tag != first.tag


def test_aliases_and_networked_builds(docker_base: str, tmp_path: Path) -> None:
    dockerfile = (
        "FROM python:3.12-slim@sha256:"
        + "c" * 64
        + "\nRUN ls /sys/class/net > /netifs && python3 --version\nWORKDIR /app\n"
    )
    task = make_task(tmp_path / "t", dockerfile=dockerfile, files={"x": "x\n"})
    built = image_build.ensure_task_image(task, {"python:3.12-slim": docker_base})
    with DockerEnv(task, built.id) as env:
        # as in Harbor, the build had the network although the episode has none (allow_internet = false)
        assert env.run("cat /netifs").stdout == "eth0\nlo\n"
        assert env.run("ls /sys/class/net").stdout == "lo\n"
    unknown = make_task(tmp_path / "u", dockerfile="FROM no-such-image-anywhere:1\n", files={"x": "x\n"})
    with pytest.raises(
        EnvError,
        match=r"environment/Dockerfile: base image 'no-such-image-anywhere:1' is not present locally",
    ):
        image_build.ensure_task_image(unknown)


def test_failed_build_names_the_dockerfile(docker_base: str, tmp_path: Path) -> None:
    task = make_task(tmp_path / "t", dockerfile="FROM debian:bookworm-slim\nRUN exit 7\n", files={"x": "x\n"})
    with pytest.raises(EnvError, match=r"environment/Dockerfile: image build failed at step "):
        image_build.ensure_task_image(task)
    assert os.path.isdir(tmp_path / "t")


def test_workdir_from_the_image_and_prebuilt_docker_image(docker_base: str, tmp_path: Path) -> None:
    folder = tmp_path / "w"
    (folder / "tests").mkdir(parents=True)
    (folder / "environment").mkdir()
    (folder / "task.toml").write_text('version = "1.0"\n')  # no workdir: the image's WORKDIR counts
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "tests" / "test.sh").write_text("exit 0\n")
    (folder / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /workdir\nRUN echo data > seed.txt\n"
    )
    task = load_task(folder)
    with DockerEnv(task, image_build.ensure_task_image(task).id) as env:
        assert env.run('pwd; echo "$APP_DIR"; cat seed.txt').stdout == "/workdir\n/workdir\ndata\n"
    (folder / "environment" / "Dockerfile").unlink()
    (folder / "task.toml").write_text(f'version = "1.0"\n[environment]\ndocker_image = "{docker_base}"\n')
    prebuilt = load_task(folder)
    with DockerEnv(prebuilt, image_build.ensure_task_image(prebuilt).id) as env:
        # no WORKDIR in the image: the container's root, as in Harbor (no /app is made)
        assert env.run("pwd; python3 -c 'print(6 * 7)'; ls -d /app").stdout == "/\n42\n"
