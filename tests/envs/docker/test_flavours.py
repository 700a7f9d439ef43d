"""The python flavour of the base image: pip, venv, uv, pytest offline; python:* aliases;
TB2's uv verifier through the uvx shim."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaykit.envs.docker import images
from replaykit.envs.docker.flavours import PYTHON_IMAGE, build_python_image
from tests.cli_runner import cli

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def flavour(docker_base: str) -> str:
    return str(build_python_image()["tag"])  # cached: built once by scripts/setup-docker.sh


def test_python_tags_alias_to_the_flavour(flavour: str) -> None:
    client = images.docker_client()
    for ref in (
        "python:3.13-slim-bookworm",
        "python:3.12-slim",
        "docker.io/library/python:3.11@sha256:" + "0" * 64,
        "python:3",
    ):
        assert images.alias_for(client, ref, {}) == PYTHON_IMAGE, ref
    assert (
        images.alias_for(client, "python:3.12-alpine", {}) == "python:3.12-alpine"
    )  # not Debian: left alone
    assert images.alias_for(client, "debian:bookworm-slim", {}) == images.BASE_IMAGE
    assert (
        images.alias_for(client, "python:3.13-slim-bookworm", {"python:3.13-slim-bookworm": "mine:1"})
        == "mine:1"
    )


def test_flavour_has_pip_venv_uv_pytest_offline(flavour: str) -> None:
    script = (
        "set -e; pip --version >/dev/null; uv --version >/dev/null; python3 -m pytest --version; "
        "python3 -m venv /tmp/v && /tmp/v/bin/python -m pip --version >/dev/null; "
        "pip install --no-cache-dir pytest-json-ctrf >/dev/null && echo pip-offline-ok; "
        "cd /tmp && printf 'def test_ok():\\n    assert 1\\n' > test_x.py && "
        ". $HOME/.local/bin/env && uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /tmp/c.json test_x.py -q"
    )
    out = images.docker_client().containers.run(
        flavour, ["bash", "-c", script], remove=True, network_mode="none"
    )
    text = out.decode()
    assert "pip-offline-ok" in text and "1 passed" in text, text


def test_tb2_uv_verifier_task_passes_offline(flavour: str) -> None:
    proc = cli("tasks", "check", "envs/py-word-stats", "--json", timeout=600, cwd=REPO)
    (row,) = json.loads(proc.stdout)["tasks"]
    assert proc.returncode == 0 and (row["untouched"], row["solved"]) == (0.0, 1.0), row
    test_sh = (REPO / "envs" / "py-word-stats" / "tests" / "test.sh").read_text()
    assert "curl -LsSf" in test_sh and "uvx" in test_sh  # the usual TB2 shape, unchanged


def test_ecr_python_task_passes_tasks_check_with_no_flags(flavour: str) -> None:
    """``FROM public.ecr.aws/docker/library/python:3.11-slim`` (AWS's mirror of Docker Hub) runs
    on the python flavour by default, and says so."""
    task = REPO / "tests" / "harbor" / "corpus" / "ecr-python"
    proc = cli("tasks", "check", str(task), "--json", timeout=600, cwd=REPO)
    report = json.loads(proc.stdout)
    (row,) = report["tasks"]
    assert row["ok"] and row["untouched"] == 0 and row["solved"] == 1, row
    note = f"FROM public.ecr.aws/docker/library/python:3.11-slim runs on {PYTHON_IMAGE} (image alias)"
    assert report["notes"][note] == ["ecr-python"], report["notes"]


def test_the_flavour_bundles_exactly_its_pinned_wheels(flavour: str) -> None:
    from replaykit.envs.docker.flavours import WHEEL_PINS

    out = images.docker_client().containers.run(
        flavour, ["python3", "-m", "pip", "freeze", "--all"], remove=True, network_mode="none"
    )
    installed = {line.lower().replace("_", "-") for line in out.decode().split()}
    assert {pin.lower() for pin in WHEEL_PINS} <= installed, sorted(installed)
