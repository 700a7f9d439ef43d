"""Each environment kind validates its own ``env`` keys: the shared section keeps only
what every kind has; a key of another kind, a misspelt key or a bad value is one line."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from replaykit.core.errors import ConfigError, EnvError
from replaykit.envs.base import Environment, EnvRequest, EnvSection, EnvSettings, KeyPairs
from replaykit.envs.docker.settings import DockerSettings
from replaykit.envs.extras import Extras
from replaykit.envs.registry import ENVIRONMENTS, env_key_extra, get_env_kind, make_env, register_env
from replaykit.envs.section import EnvConfig, recorded_env
from replaykit.envs.tasks import Task, load_task
from replaykit.episodes.config import RunConfig, load_config
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


def test_stored_configs_of_older_versions_still_load_and_only_when_read_as_stored(tmp_path: Path) -> None:
    """Before kinds had settings every config dumped ``image_aliases: {}``, local ones too: a
    stored one (a training's config, an episode's recorded section) still reads; anywhere else
    the key is the docker kind's, refused."""
    old = {"kind": "local", "timeout_sec": 30.0, "image_aliases": {}}
    assert "image_aliases" not in recorded_env(old).model_dump()
    config = RunConfig.recorded({"panel": {"tasks": ["t"]}, "env": old}, "training t")
    assert config.env.kind == "local" and "image_aliases" not in config.env.model_dump()
    refused = "field 'env.image_aliases' is a setting of env kind 'docker', not of 'local'"
    with pytest.raises(ConfigError, match=refused):
        _load(tmp_path, old)
    with pytest.raises(ValueError, match=refused):
        EnvConfig.model_validate(old)  # no validation context: validated as a config's section is
    docker = _load(tmp_path, {"kind": "docker", "image_aliases": {"debian:12": "replaykit/base:bookworm"}})
    assert docker.settings == DockerSettings(image_aliases={"debian:12": "replaykit/base:bookworm"})


def test_an_uninstalled_kind_is_a_line_of_the_file_but_a_stored_config_still_loads(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"line 2: field 'env.kind': unknown environment kind 'not-installed'"
    ):
        _load(tmp_path, {"kind": "not-installed"})
    with pytest.raises(ValueError, match=r"field 'env.kind': unknown environment kind 'not-installed'"):
        EnvConfig.model_validate({"kind": "not-installed"})  # no context: as a config file's
    env = recorded_env({"kind": "not-installed"})  # a stored section (replay builds no env)
    with pytest.raises(Exception, match="unknown environment kind 'not-installed'"):
        env.settings  # noqa: B018


@dataclass(frozen=True)
class _Key:
    id: str
    extra: KeyPairs = ()


@dataclass(frozen=True)
class _Request:
    key: _Key
    task_path: str
    env: EnvSection
    extras: Extras = field(default_factory=dict)


def test_a_kinds_hooks_get_its_settings_typed_and_never_another_kinds(tmp_path: Path) -> None:
    """``EnvKind[S]``: the factory and ``key_extra`` get the section with settings ``S`` (read
    as ``request.env.settings.socket``, no parse); a section validated under another kind is
    refused before a hook sees it."""
    seen: list[SocketSettings] = []

    def factory(request: EnvRequest[SocketSettings]) -> Environment:
        seen.append(request.env.settings)
        return get_env_kind("local").factory(request)

    def key_extra(env: EnvSection[SocketSettings], task: Task) -> KeyPairs:
        return (("socket", env.settings.socket),)

    kind = register_env("typed-socket", factory, key_extra, settings=SocketSettings)
    try:
        env = _load(tmp_path, {"kind": "typed-socket", "socket": "/tmp/t.sock"})
        task = load_task(project_root() / "envs" / "hello-file")
        assert env_key_extra(env, task) == (("env", "typed-socket"), ("socket", "/tmp/t.sock"))
        built = make_env(_Request(_Key("typed-socket-episode"), str(task.path), env))
        assert built.kind == "local" and seen == [SocketSettings(socket="/tmp/t.sock")]
        local = EnvConfig(kind="local")
        refused = "env kind 'typed-socket' takes SocketSettings, not EnvSettings"
        with pytest.raises(EnvError, match=refused):
            kind.build(_Request(_Key("other"), str(task.path), local))
        with pytest.raises(EnvError, match=refused):
            kind.key(local, task)
        assert len(seen) == 1
    finally:
        ENVIRONMENTS.unregister("typed-socket")
