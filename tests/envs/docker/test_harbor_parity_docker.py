"""Harbor parity in Docker (issue 20): the image's ENTRYPOINT services stay up for the
agent and the verifier, builds and episodes have the network unless the task says
``no-network`` (schema 1.4's ``network_mode`` read), no ``/app`` is made when the image
sets no WORKDIR, and a networked episode is marked ``network unfrozen``."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.envs.docker import image_build, images
from replaykit.envs.docker.env import DockerEnv
from replaykit.envs.docker.kind import ENV, oracle
from replaykit.envs.section import EnvConfig
from replaykit.envs.tasks import load_task

pytestmark = pytest.mark.docker
REWARD_IF = 'mkdir -p "$LOGS_DIR/verifier"\nif {cond}; then echo 1; else echo 0; fi > "$LOGS_DIR/verifier/reward.txt"\n'


def write(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def task(folder: Path, toml: str, dockerfile: str, cond: str, solve: str = "true\n", **extra: str) -> Path:
    return write(
        folder,
        {
            "task.toml": 'version = "1.0"\n' + toml,
            "instruction.md": "Do it.\n",
            "environment/Dockerfile": dockerfile,
            "tests/test.sh": REWARD_IF.format(cond=cond),
            "solution/solve.sh": solve,
            **extra,
        },
    )


ENTRYPOINT = """#!/bin/bash
# starts a service, then runs the container's command (Harbor: sleep infinity)
bash -c 'while :; do sleep 1; done' > /dev/null 2>&1 &
echo $! > /run/service.pid
exec "$@"
"""


def test_entrypoint_service_stays_up_for_agent_and_verifier(docker_base: str, tmp_path: Path) -> None:
    folder = task(
        tmp_path / "entrypoint-service",
        "",
        f'FROM {docker_base}\nCOPY start.sh /start.sh\nRUN chmod +x /start.sh\nENTRYPOINT ["/start.sh"]\n',
        'kill -0 "$(cat /run/service.pid)" && [ -f /tmp/solved ]',
        solve="touch /tmp/solved\n",
        **{"environment/start.sh": ENTRYPOINT},
    )
    t = load_task(folder)
    image = image_build.ensure_task_image(t)
    with DockerEnv(t, image.id, episode="entrypoint") as env:
        first = env.run(
            'kill -0 "$(cat /run/service.pid)" && echo up; (setsid sleep 300 &) ; sleep 301 & echo $! > /tmp/agent.pid'
        )
        assert first.stdout.strip() == "up", first
        alive = (
            'kill -0 "$(cat /run/service.pid)" && echo up; kill -0 "$(cat /tmp/agent.pid)" && echo agent || echo gone; '
            "for p in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $p 2>/dev/null; echo; done | grep -c '^sleep 300 $'"
        )
        second = env.run(alive)
        # the service is up; so are the agent's background and daemonised processes (as in Harbor)
        assert second.stdout.split() == ["up", "agent", "1"], second
        env.grade()  # after the verifier only the service is left
        assert env.run(alive).stdout.split() == ["up", "gone", "0"]
        assert int(str(env.metadata()["services"])) >= 1 and env.metadata()["entrypoint"] == ["/start.sh"]
    untouched, solved = oracle(t, ENV.section(EnvConfig(kind="docker")))
    assert untouched.reward == 0 and not untouched.infra_failure, untouched.detail
    assert solved.passed, solved.detail


def test_build_and_episode_have_network_by_default(docker_base: str, tmp_path: Path) -> None:
    netifs = "RUN ls /sys/class/net > /build-netifs\n"
    default = load_task(
        task(
            tmp_path / "net-default",
            "",
            f"FROM {docker_base}\n{netifs}",
            "grep -qv '^lo$' /build-netifs && ls /sys/class/net | grep -qv '^lo$'",
        )
    )
    assert default.network_mode == "public" and default.allow_internet
    untouched, _ = oracle(default, ENV.section(EnvConfig(kind="docker")))
    assert untouched.reward == 1, untouched.detail  # built and ran with an interface besides lo
    closed = load_task(
        task(
            tmp_path / "net-closed",
            'schema_version = "1.4"\n[environment]\nnetwork_mode = "no-network"\n',
            f"FROM {docker_base}\n{netifs}",
            "grep -qv '^lo$' /build-netifs && [ \"$(ls /sys/class/net)\" = lo ]",
        )
    )
    assert closed.network_mode == "no-network" and not closed.allow_internet
    untouched, _ = oracle(closed, ENV.section(EnvConfig(kind="docker")))
    assert untouched.reward == 1, untouched.detail  # the build had the network, the episode none
    image = image_build.ensure_task_image(closed)
    assert DockerEnv(closed, image.id).metadata()["network"] == "none"
    image = image_build.ensure_task_image(default)
    assert DockerEnv(default, image.id).metadata()["network"] == "unfrozen"


def test_no_app_folder_when_the_image_sets_no_workdir(docker_base: str, tmp_path: Path) -> None:
    t = load_task(
        task(tmp_path / "no-workdir", "", f"FROM {docker_base}\n", '[ ! -e /app ] && [ "$PWD" = / ]')
    )
    untouched, _ = oracle(t, ENV.section(EnvConfig(kind="docker")))
    assert untouched.reward == 1, untouched.detail
    with_workdir = load_task(
        task(
            tmp_path / "image-workdir",
            "",
            f"FROM {docker_base}\nWORKDIR /srv/work\n",
            '[ "$PWD" = /srv/work ] && [ ! -e /app ]',
        )
    )
    untouched, _ = oracle(with_workdir, ENV.section(EnvConfig(kind="docker")))
    assert untouched.reward == 1, untouched.detail


def test_python_flavour_keeps_the_index_and_says_what_it_swaps(docker_base: str, tmp_path: Path) -> None:
    from replaykit.envs.check import check_tasks
    from replaykit.envs.docker.flavours import PYTHON_IMAGE, build_python_image, substitutions

    build_python_image()
    client = images.docker_client()
    pip_config = client.containers.run(PYTHON_IMAGE, ["python3", "-m", "pip", "config", "list"], remove=True)
    assert b"no-index" not in pip_config and b"find-links" in pip_config
    folder = task(
        tmp_path / "uvx-pins",
        "[environment]\nallow_internet = false\n",
        "FROM python:3.13-slim-bookworm\nWORKDIR /app\nRUN pip install pytest\n",
        "uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest -q /tests/test_x.py >&2",
        solve="touch /app/done\n",
        **{"tests/test_x.py": "import os\n\ndef test_done():\n    assert os.path.exists('/app/done')\n"},
    )
    t = load_task(folder)
    notes = substitutions(t, {})
    assert f"FROM python:3.13-slim-bookworm runs on {PYTHON_IMAGE} (image alias)" in notes
    assert any(
        "uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 in tests/: replaced" in n for n in notes
    )
    _, solved = oracle(t, ENV.section(EnvConfig(kind="docker")))
    assert solved.passed, solved.detail
    assert (
        "replaykit uvx: runs the bundled pytest" in solved.detail
        and "ignored: -p 3.13 -w pytest==8.4.1" in solved.detail
    )
    row = check_tasks([str(folder)], tmp_path)["tasks"][0]
    assert (
        row["ok"] and row["notes"] == notes and not any("alias" in w or "uvx" in w for w in row["warnings"])
    )
    from types import SimpleNamespace

    from replaykit.envs.docker.kind import factory

    request = SimpleNamespace(
        key=SimpleNamespace(extra=(), id="ep"), task_path=str(folder), env=EnvConfig(kind="docker"), extras={}
    )
    assert factory(request).metadata()["warnings"] == notes  # what a run stores with each episode


def test_fresh_engine_without_the_python_flavour_says_what_to_build(
    docker_base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replaykit.envs.check import check_tasks

    real = images.image_exists
    monkeypatch.setattr(
        images,
        "image_exists",
        lambda client, ref: None if ref == images.PYTHON_FLAVOUR else real(client, ref),
    )
    repo = Path(__file__).resolve().parents[3]
    report = check_tasks(["envs/py-word-stats", "envs/hello-file"], repo)
    rows = {r["task_id"]: r for r in report["tasks"]}
    problem = rows["py-word-stats"]["problem"]
    assert "run `replaykit images build-base --flavor python`" in problem and "pip: not found" not in problem
    assert len(problem.splitlines()) == 1 and rows["hello-file"]["ok"]


def test_a_server_the_solution_leaves_running_answers_the_verifier(docker_base: str) -> None:
    """The solution starts a server with a plain `&` (its request log on the stream it inherited)
    and returns; the verifier queries it: solved, as in Harbor."""
    task = load_task(Path(__file__).resolve().parents[2] / "harbor" / "corpus" / "background-server")
    untouched, solved = oracle(task, ENV.section(EnvConfig(kind="docker")))
    assert untouched.reward == 0 and not untouched.infra_failure, untouched.detail
    assert solved.passed and solved.reward == 1, solved.detail
