"""Environment kinds by name: built-ins load lazily, unknown names are one clear error."""

from __future__ import annotations

import sys

import pytest

from replaykit.core.errors import EnvError
from replaykit.envs.registry import ENVIRONMENTS, get_env_kind, uses_docker


def test_builtins_are_known_and_docker_loads_only_when_asked() -> None:
    assert {"local", "docker"} <= set(ENVIRONMENTS.names())
    assert get_env_kind("local").kind == "local" and not get_env_kind("local").uses_docker
    assert uses_docker("docker") and not uses_docker("local") and not uses_docker("not-installed")


def test_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(EnvError, match=r"unknown environment kind 'nope'; known: .*docker.*local"):
        get_env_kind("nope")


def test_looking_up_local_does_not_import_docker() -> None:
    import subprocess

    code = "import sys; from replaykit.envs.registry import get_env_kind; get_env_kind('local'); print('replaykit.envs.docker.env' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
