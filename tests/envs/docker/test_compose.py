"""Multi-container tasks (docker-compose.yaml through the Docker SDK): parsing and refusals
(unit), sidecars on a private network with healthchecks, failures, cleanup (Docker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.core.errors import TaskError
from replaykit.envs.docker import compose, image_build, images
from replaykit.envs.tasks import load_task

REPO = Path(__file__).resolve().parents[3]


def task_with(tmp: Path, compose_text: str, files: dict[str, str] | None = None) -> Path:
    folder = tmp / "multi"
    for rel, text in {
        "task.toml": 'version = "2.0"\n[environment]\nmemory_mb = 256\nallow_internet = false\n',
        "instruction.md": "Talk to the service.\n",
        "tests/test.sh": 'mkdir -p "$LOGS_DIR/verifier"; [ -f "$APP_DIR/done" ] && echo 1 > "$LOGS_DIR/verifier/reward.txt" || echo 0 > "$LOGS_DIR/verifier/reward.txt"\n',
        "environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /app\n",
        "environment/docker-compose.yaml": compose_text,
        "environment/svc/Dockerfile": "FROM python:3.12-slim\n",
        **(files or {}),
    }.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def test_parse_order_env_and_durations(tmp_path: Path) -> None:
    folder = task_with(
        tmp_path,
        """services:
  main:
    depends_on: [b]
    environment: {URL: "http://b:${PORT:-80}"}
  b:
    build: ./svc
    depends_on: {a: {condition: service_healthy}}
    healthcheck: {test: "true", interval: 1m30s, timeout: 500ms}
  a:
    image: debian:bookworm-slim
    environment: ["X=1"]
    ports: ["8080:80"]
""",
    )
    spec = compose.load_compose(load_task(folder), {})
    assert spec is not None and [s.name for s in spec.sidecars] == ["a", "b"]
    assert spec.main_env == {"URL": "http://b:80"} and spec.main_depends == ("b",)
    b = spec.services["b"]
    assert b.healthcheck == {
        "test": ["CMD-SHELL", "true"],
        "interval": 90_000_000_000,
        "timeout": 500_000_000,
        "start_period": 0,
        "retries": 3,
    }
    assert spec.services["a"].environment == {"X": "1"}


@pytest.mark.parametrize(
    "text,match",
    [
        ("services:\n  a:\n    image: x\n    volumes: ['/:/host']\n", "field 'volumes' is not supported"),
        ("services:\n  a:\n    image: x\n    depends_on: [nope]\n", "depends_on names 'nope'"),
        (
            "services:\n  a:\n    image: x\n    depends_on: [b]\n  b:\n    image: x\n    depends_on: [a]\n",
            "cycle",
        ),
        ("services:\n  a:\n    build: ../../etc\n", "field 'build' must name a folder under environment/"),
        ("services:\n  a:\n    image: x\nvolumes: {}\n", "top-level field 'volumes'"),
        (
            "services:\n  a:\n    image: x\n    healthcheck: {test: 'true', interval: soon}\n",
            "not a duration",
        ),
    ],
)
def test_refusals_are_one_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(TaskError, match=match):
        compose.load_compose(load_task(task_with(tmp_path, text)), {})


def leftovers(episode_prefix: str) -> tuple[list[str], list[str]]:
    api = images.docker_client().api
    names = [
        c["Names"][0]
        for c in api.containers(all=True, filters={"label": "replaykit=1"})
        if episode_prefix in c["Names"][0]
    ]
    nets = [n["Name"] for n in api.networks(filters={"label": "replaykit=1"}) if episode_prefix in n["Name"]]
    return names, nets


@pytest.mark.docker
def test_sidecar_reachable_by_name_and_everything_removed(docker_base: str, tmp_path: Path) -> None:
    from replaykit.envs.docker.env import DockerEnv
    from replaykit.envs.docker.flavours import build_python_image

    build_python_image()
    folder = task_with(
        tmp_path,
        """services:
  main:
    environment: {SVC: "http://svc:8000"}
  svc:
    build: ./svc
    command: ["python3", "-m", "http.server", "8000", "--directory", "/srv"]
    healthcheck: {test: ["CMD", "python3", "-c", "import urllib.request as u; u.urlopen('http://localhost:8000/')"], interval: 1s, retries: 30}
""",
        {"environment/svc/Dockerfile": "FROM python:3.12-slim\nRUN mkdir -p /srv && echo pong > /srv/ping\n"},
    )
    task = load_task(folder)
    with DockerEnv(
        task, image_build.ensure_task_image(task).id, timeout_sec=20, episode="composetest"
    ) as env:
        obs = env.run(
            "python3 -c \"import os, urllib.request as u; print(u.urlopen(os.environ['SVC'] + '/ping').read().decode().strip())\""
        )
        assert obs.stdout == "pong\n", obs
        outside = env.run(
            "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)\""
        )
        assert outside.exit_code != 0  # the private network is internal: no way out
        assert leftovers("composetest") != ([], [])
    assert leftovers("composetest") == ([], [])


@pytest.mark.docker
def test_sidecar_that_dies_is_an_infra_failure(docker_base: str, tmp_path: Path) -> None:
    from replaykit.envs.docker.env import DockerEnv

    folder = task_with(
        tmp_path, "services:\n  svc:\n    image: debian:bookworm-slim\n    command: ['false']\n"
    )
    task = load_task(folder)
    with DockerEnv(
        task,
        image_build.ensure_task_image(task).id,
        timeout_sec=10,
        episode="composedead",
        aliases={"debian:bookworm-slim": images.BASE_IMAGE},
    ) as env:
        # the service may still be starting when the episode begins: wait for its exit, so
        # the death is seen either at start or after the action, never missed
        service = images.docker_client().containers.list(
            all=True, filters={"label": ["replaykit.episode=composedead", "replaykit.service=svc"]}
        )
        assert len(service) == 1
        service[0].wait(timeout=30)
        obs = env.run("touch done")
        assert obs.exit_code == 137 and "service 'svc' exited" in obs.stderr
        grade = env.grade()
    assert grade.infra_failure and "service 'svc' exited" in grade.detail
    assert leftovers("composedead") == ([], [])
