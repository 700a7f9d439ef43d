"""Each environment kind validates its own ``env`` keys: the shared section keeps only
what every kind has; a key of another kind, a misspelt key or a bad value is one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from replaykit.core.errors import ConfigError
from replaykit.envs.base import EnvSettings
from replaykit.envs.docker.settings import DockerSettings
from replaykit.envs.registry import ENVIRONMENTS, get_env_kind, register_env
from replaykit.envs.section import EnvConfig
from replaykit.episodes.config import load_config
from replaykit.testing import project_root

pytestmark = pytest.mark.unit


class SocketSettings(EnvSettings):
    socket: str = "/run/sandbox.sock"
    slots: int = 1


def _load(tmp_path: Path, env: dict[str, object]) -> EnvConfig:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump({"env": env, "panel": {"tasks": [str(project_root() / "envs" / "hello-file")]}})
    )
    return load_config(path).env


@pytest.fixture
def socket_kind() -> Iterator[None]:
    register_env("socketed", get_env_kind("local").factory, settings=SocketSettings)
    yield
    ENVIRONMENTS.unregister("socketed")


def test_a_kind_gets_its_own_keys_typed_and_the_section_stays_flat(tmp_path: Path, socket_kind: None) -> None:
    env = _load(tmp_path, {"kind": "socketed", "socket": "/tmp/s.sock", "timeout_sec": 5})
    assert env.settings == SocketSettings(socket="/tmp/s.sock", slots=1)
    assert env.model_dump() == {
        "kind": "socketed",
        "timeout_sec": 5.0,
        "max_output_bytes": 65536,
        "snapshot": "digest",
        "socket": "/tmp/s.sock",
        "slots": 1,
    }
    assert SocketSettings.of(env).socket == "/tmp/s.sock"


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"kind": "local", "socket": "x"},
            "field 'env.socket' is a setting of env kind 'socketed', not of 'local'; set env.kind: socketed",
        ),
        ({"kind": "socketed", "sockt": "x"}, "field 'env.sockt' is not a setting of env kind 'socketed'"),
        ({"kind": "socketed", "slots": "many"}, "field 'env.slots': Input should be a valid integer"),
        (
            {"kind": "local", "image_aliases": {"a": "b"}},
            "field 'env.image_aliases' is a setting of env kind 'docker', not of 'local'",
        ),
        (
            {"kind": "docker", "image_aliases": 3},
            "field 'env.image_aliases': Input should be a valid dictionary",
        ),
        ({"kind": "nope", "socket": "x"}, "unknown environment kind 'nope'; known:"),
    ],
)
def test_keys_the_kind_does_not_take_are_one_line(
    tmp_path: Path, socket_kind: None, env: dict[str, object], line: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, env)
    assert line in str(info.value) and "\n" not in str(info.value)


def test_stored_configs_of_older_versions_still_load(tmp_path: Path) -> None:
    """Before kinds had settings every config dumped ``image_aliases: {}``, local ones too."""
    env = _load(tmp_path, {"kind": "local", "image_aliases": {}})
    assert "image_aliases" not in env.model_dump()
    docker = _load(tmp_path, {"kind": "docker", "image_aliases": {"debian:12": "replaykit/base:bookworm"}})
    assert docker.settings == DockerSettings(image_aliases={"debian:12": "replaykit/base:bookworm"})


def test_an_uninstalled_kind_is_a_line_of_the_file_but_a_stored_config_still_loads(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"line 2: field 'env.kind': unknown environment kind 'not-installed'"
    ):
        _load(tmp_path, {"kind": "not-installed"})
    env = EnvConfig.model_validate({"kind": "not-installed"})  # a stored config (replay builds no env)
    with pytest.raises(Exception, match="unknown environment kind 'not-installed'"):
        env.settings  # noqa: B018
