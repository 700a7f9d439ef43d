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
        (
            "services:\n  a:\n    image: x\n    volumes: ['/:/host']\n",
            "field 'volumes': '/:/host' mounts a host folder",
        ),
        ("services:\n  a:\n    image: x\n    volumes: ['./d:/d']\n", "mounts a host folder"),
        (
            "services:\n  a:\n    image: x\n    volumes: [{type: bind, source: ., target: /d}]\n",
            "mounts a host folder",
        ),
        ("services:\n  a:\n    image: x\n    volumes: ['data:/d']\n", "top-level 'volumes' does not declare"),
        ("services:\n  a:\n    image: x\nvolumes:\n  data: {external: true}\n", "external"),
        ("services:\n  a:\n    image: x\nvolumes:\n  data: {driver: nfs}\n", "driver 'nfs'"),
        ("services:\n  a:\n    image: x\n    networks: [back]\n", "top-level 'networks' does not declare"),
        (
            "services:\n  a:\n    image: x\nsecrets:\n  key: {environment: KEY}\n",
            "not the host's environment",
        ),
        (
            "services:\n  a:\n    image: x\nsecrets:\n  key: {file: ../../etc/passwd}\n",
            "a file under environment/",
        ),
        ("services:\n  a:\n    image: x\ninclude: [other.yaml]\n", "top-level field 'include'"),
        ("services:\n  a:\n    image: x\n    depends_on: [nope]\n", "depends_on names 'nope'"),
        (
            "services:\n  a:\n    image: x\n    depends_on: [b]\n  b:\n    image: x\n    depends_on: [a]\n",
            "cycle",
        ),
        ("services:\n  a:\n    build: ../../etc\n", "field 'build' must name a folder under environment/"),
        (
            "services:\n  a:\n    image: x\n    healthcheck: {test: 'true', interval: soon}\n",
            "not a duration",
        ),
    ],
)
def test_refusals_are_one_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(TaskError, match=match):
        compose.load_compose(load_task(task_with(tmp_path, text)), {})


def test_volumes_networks_secrets_and_configs_are_read(tmp_path: Path) -> None:
    """The top-level fields Harbor's compose-go takes: named and anonymous volumes, tmpfs,
    declared networks with aliases, file secrets and configs (read from environment/)."""
    folder = task_with(
        tmp_path,
        """name: mine
x-common: &common {environment: {A: "1"}}
services:
  main:
    volumes: [shared:/shared, /scratch]
    networks: [back]
    secrets: [token]
  svc:
    <<: *common
    image: debian:bookworm-slim
    volumes:
      - {type: volume, source: shared, target: /data, read_only: true}
      - {type: tmpfs, target: /run/cache}
    networks: {back: {aliases: [api, api.internal]}}
    configs: [{source: settings, target: /etc/svc.conf}]
volumes:
  shared: {}
networks:
  back: {driver: bridge}
secrets:
  token: {file: ./token.txt}
configs:
  settings: {content: "port = 1\\n"}
""",
        {"environment/token.txt": "s3cret\n"},
    )
    spec = compose.load_compose(load_task(folder), {})
    assert spec is not None and spec.volumes == ("shared",)
    assert [(m.source, m.target, m.read_only) for m in spec.main_mounts] == [
        ("shared", "/shared", False),
        (None, "/scratch", False),
    ]
    svc = spec.services["svc"]
    assert [(m.source, m.target, m.read_only, m.tmpfs) for m in svc.mounts] == [
        ("shared", "/data", True, False),
        (None, "/run/cache", False, True),
    ]
    assert svc.aliases == ("api", "api.internal") and svc.environment == {"A": "1"}
    assert [(f.target, f.data) for f in spec.main_files] == [("/run/secrets/token", b"s3cret\n")]
    assert [(f.target, f.data) for f in svc.files] == [("/etc/svc.conf", b"port = 1\n")]


def leftovers(episode_prefix: str) -> tuple[list[str], list[str]]:
    api = images.docker_client().api
    names = [
        c["Names"][0]
        for c in api.containers(all=True, filters={"label": "replaykit=1"})
        if episode_prefix in c["Names"][0]
    ]
    nets = [n["Name"] for n in api.networks(filters={"label": "replaykit=1"}) if episode_prefix in n["Name"]]
    volumes = api.volumes(filters={"label": "replaykit=1"}).get("Volumes") or []
    return names, nets + [v["Name"] for v in volumes if episode_prefix in v["Name"]]


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


@pytest.mark.docker
def test_a_named_volume_is_shared_per_episode_and_removed(docker_base: str, tmp_path: Path) -> None:
    """main and a sidecar share a fresh named volume (the sidecar reaches it read-only, by an
    alias on the declared network); a secret file is where compose puts it; the next episode
    starts with an empty volume; nothing is left after close."""
    from replaykit.envs.docker.env import DockerEnv

    folder = task_with(
        tmp_path,
        """services:
  main:
    volumes: [shared:/shared]
    secrets: [token]
  svc:
    image: debian:bookworm-slim
    volumes: ['shared:/data:ro']
    networks: {back: {aliases: [reader]}}
    command: ["bash", "-c", "while :; do sleep 0.2; done"]
volumes:
  shared:
networks:
  back:
secrets:
  token: {file: token.txt}
""",
        {"environment/token.txt": "s3cret\n"},
    )
    task = load_task(folder)
    image = image_build.ensure_task_image(task).id
    aliases = {"debian:bookworm-slim": images.BASE_IMAGE}
    for episode in ("composevol1", "composevol2"):
        with DockerEnv(task, image, timeout_sec=20, episode=episode, aliases=aliases) as env:
            first = env.run(
                "ls /shared; cat /run/secrets/token; echo hi > /shared/note; getent hosts reader | wc -l"
            )
            assert first.stdout == "s3cret\n1\n", first  # empty volume, the secret, the alias resolves
            svc = images.docker_client().containers.list(
                filters={"label": [f"replaykit.episode={episode}", "replaykit.service=svc"]}
            )[0]
            assert svc.exec_run(["cat", "/data/note"]).output == b"hi\n"
            assert svc.exec_run(["touch", "/data/x"]).exit_code != 0  # read-only there
            assert leftovers(episode)[1]
        assert leftovers(episode) == ([], [])
