"""Executor kinds by name (local, ray, registered, entry points), and the env kind's
worker-node hook: what a kind asks of the nodes reaches the executor, and Docker's
base-image shipping runs behind that hook, with no Docker knowledge in the executor."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from replaykit.core.document import STORED
from replaykit.core.errors import ConfigError
from replaykit.envs.base import NodeNeeds
from replaykit.envs.docker import node_images
from replaykit.envs.registry import get_env_kind
from replaykit.envs.section import EnvConfig
from replaykit.episodes.config import RunConfig
from replaykit.episodes.run import measure
from replaykit.execution.config import ExecutorConfig, parse_executor
from replaykit.execution.executor import LocalExecutor, LocalSettings
from replaykit.execution.ray_executor import RayExecutor, RaySettings
from replaykit.execution.registry import EXECUTORS, register_executor
from replaykit.execution.select import cli_executor, cli_section, make_executor
from replaykit.execution.settings import ExecutorKind, ExecutorSettings
from replaykit.testing import small_config

pytestmark = pytest.mark.unit


def test_builtin_kinds_by_name_and_unknown_is_one_line() -> None:
    assert {"local", "ray"} <= set(EXECUTORS.names())
    assert isinstance(make_executor(ExecutorConfig.model_validate({"workers": 1})), LocalExecutor)
    section = {"kind": "ray", "address": "ray://head:10001", "cpus": 2, "resources": {"gpu": 1}}
    ray = make_executor(ExecutorConfig.model_validate(section))
    assert isinstance(ray, RayExecutor) and ray.address == "ray://head:10001"
    assert ray.options()["resources"] == {"gpu": 1} and ray.options()["num_cpus"] == 2
    assert isinstance(cli_executor(ray_address="local"), RayExecutor) and cli_executor() is None
    with pytest.raises(ValueError, match=r"unknown executor kind 'slurm'; known: .*local.*ray"):
        ExecutorConfig(kind="slurm")


def test_each_executor_kind_has_its_own_typed_settings() -> None:
    """The factory gets its kind's model, validated once; a key of another kind, or of none,
    is one line naming the key (and the kind that has it)."""
    local = ExecutorConfig.model_validate({"kind": "local", "workers": "3"})
    assert isinstance(local.settings, LocalSettings) and local.settings.workers == 3
    assert local.model_dump() == {"kind": "local", "workers": 3, "oversubscribe": False}
    ray = ExecutorConfig.model_validate({"kind": "ray", "cpus": 2})
    assert isinstance(ray.settings, RaySettings) and ray.settings.cpus == 2.0
    for section, line in [
        (
            {"kind": "local", "address": "auto"},
            "field 'executor.address' is a setting of executor kind 'ray', not of 'local'",
        ),
        (
            {"kind": "ray", "workers": 4},
            "field 'executor.workers' is a setting of executor kind 'local', not of 'ray'",
        ),
        (
            {"kind": "local", "wrokers": 4},
            "field 'executor.wrokers' is not a setting of executor kind 'local' (its own: workers, oversubscribe)",
        ),
        ({"kind": "ray", "cpus": 0}, "field 'executor.cpus': Input should be greater than 0 (got 0)"),
    ]:
        with pytest.raises(ValueError) as info:
            ExecutorConfig.model_validate(section, context={"source": "a config file"})
        assert line in str(info.value), info.value


def test_another_kinds_key_is_refused_without_a_context_too() -> None:
    """No validation context is no way around the kind's own keys (issue 39 item 4)."""
    for kind, key, value, owner in [("ray", "workers", 2, "local"), ("local", "address", "auto", "ray")]:
        with pytest.raises(ValidationError) as info:
            ExecutorConfig.model_validate({"kind": kind, key: value})
        line = str(info.value.errors()[0]["msg"])
        assert f"field 'executor.{key}' is a setting of executor kind {owner!r}, not of {kind!r}" in line, (
            line
        )
        assert f"set executor.kind: {owner} or remove it" in line and "\n" not in line


def test_a_stored_config_of_the_old_flat_section_still_loads() -> None:
    """A training's config stored before kinds had settings holds every kind's key: read as
    stored (``RunConfig.recorded``, context ``STORED``) it loads and dumps as it was."""
    old = {"kind": "local", "workers": 2, "oversubscribe": False, "address": "auto", "cpus": 1.0}
    flat = {**old, "memory_mb": None, "max_retries": 3, "resources": {}}
    stored = ExecutorConfig.model_validate(flat, context=STORED)
    assert stored.settings == LocalSettings(workers=2) and stored.model_dump() == flat
    config = RunConfig.recorded({"panel": {"tasks": ["t"]}, "executor": flat}, "training t")
    assert config.executor.settings == LocalSettings(workers=2) and config.executor.model_dump() == flat
    assert isinstance(make_executor(config.executor), LocalExecutor)
    with pytest.raises(ValueError, match=r"'executor\.address' is a setting of executor kind 'ray'"):
        ExecutorConfig.model_validate(flat)  # the same section, not read as stored


def test_a_config_refuses_another_kinds_key_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        small_config(tmp_path, tasks=["hello-file"], seeds=[0], **{"executor.address": "auto"})
    text = str(info.value)
    assert "field 'executor.address' is a setting of executor kind 'ray', not of 'local'" in text
    assert "\n" not in text


def test_the_cli_executor_option_is_validated_as_a_config_section() -> None:
    local = parse_executor("local:workers=4,oversubscribe=true")
    assert local.settings == LocalSettings(workers=4, oversubscribe=True)
    ray = parse_executor("ray:address=ray://head:10001,cpus=2,resources={gpu: 1, ssd: 2}")
    assert ray.settings == RaySettings(address="ray://head:10001", cpus=2, resources={"gpu": 1, "ssd": 2})
    assert parse_executor("ray").settings == RaySettings()
    for text, line in [
        (
            "local:address=auto",
            "--executor 'local:address=auto': field 'executor.address' is a setting of executor kind 'ray'",
        ),
        (
            "local:workers=many",
            "--executor 'local:workers=many': field 'executor.workers': Input should be a valid integer",
        ),
        ("slurm:x=1", "--executor 'slurm:x=1': field 'executor.kind': unknown executor kind 'slurm'"),
        ("local:workers", "--executor 'local:workers': 'workers' is not KEY=VALUE"),
        (":workers=2", "name a kind first"),
    ]:
        with pytest.raises(ConfigError) as info:
            parse_executor(text)
        assert line in str(info.value) and "\n" not in str(info.value), info.value
    with pytest.raises(ConfigError, match="--executor and --workers both name an executor"):
        cli_section(workers=2, executor="local:workers=2")
    assert cli_section(workers=3) == ExecutorConfig.model_validate({"kind": "local", "workers": 3})


class InlineSettings(ExecutorSettings):
    """A registered kind's own key."""

    label: str = "none"


class Inline:
    """A registered executor kind that remembers what it was given."""

    seen: ClassVar[list[tuple[InlineSettings, NodeNeeds, int]]] = []

    def __init__(self, settings: InlineSettings, needs: NodeNeeds) -> None:
        self.settings, self.needs = settings, needs

    def map(
        self, fn: Callable[[Any], Any], jobs: Iterable[Any], batch: bool = False
    ) -> Iterator[tuple[Any, Any]]:
        jobs = list(jobs)
        Inline.seen.append((self.settings, self.needs, len(jobs)))
        for job in jobs:
            yield job, fn(job)


def test_an_executor_kind_builds_from_its_own_settings_only() -> None:
    """``ExecutorKind[S]``: the factory gets the ``S`` instance itself; settings of another
    model never reach it (a section validated under another kind)."""
    got: list[InlineSettings] = []

    def factory(settings: InlineSettings, needs: NodeNeeds) -> Inline:
        got.append(settings)
        return Inline(settings, needs)

    kind = ExecutorKind(factory, InlineSettings)
    mine = InlineSettings(label="typed")
    built = kind.build(mine, NodeNeeds())
    assert isinstance(built, Inline) and built.settings is mine and got == [mine]
    with pytest.raises(ConfigError, match="an executor kind of InlineSettings was handed LocalSettings"):
        kind.build(LocalSettings(), NodeNeeds())
    assert got == [mine]


def test_the_executor_protocol_moved_and_its_old_name_warns() -> None:
    from replaykit.execution import executor, settings

    with pytest.warns(DeprecationWarning, match=r"replaykit\.execution\.executor\.Executor moved to"):
        assert executor.Executor is settings.Executor


def test_a_registered_executor_kind_gets_its_own_keys_typed_and_runs_the_panel(tmp_path: Path) -> None:
    register_executor("inline-test", Inline, InlineSettings)
    try:
        section = {"executor": {"kind": "inline-test", "label": "mine"}}
        config = small_config(tmp_path, tasks=["hello-file"], seeds=[0, 1], **section)
        result = measure(config)
        other = {"executor": {"kind": "inline-test", "workers": 2}}  # the local kind's key
        with pytest.raises(ConfigError) as info:
            small_config(tmp_path, tasks=["hello-file"], seeds=[0], **other)
        assert "field 'executor.workers' is a setting of executor kind 'local', not of 'inline-test'" in str(
            info.value
        )
    finally:
        EXECUTORS.unregister("inline-test")
    assert len(result.recorded) == 2
    (settings, needs, jobs), *_ = Inline.seen
    assert settings == InlineSettings(label="mine") and jobs == 2
    assert needs == NodeNeeds()  # the local env kind asks nothing of worker nodes


def test_the_docker_kind_asks_for_its_resource_and_a_node_hook() -> None:
    aliases = {"debian:12": "replaykit/base:bookworm"}
    env = EnvConfig.model_validate({"kind": "docker", "image_aliases": aliases})  # a config's env section
    needs = get_env_kind("docker").node_needs(env)
    assert needs.resource == "docker" and needs.prepare is not None
    from replaykit.execution.ray_executor import RayExecutor

    ray = make_executor(ExecutorConfig(kind="ray"), needs)
    assert isinstance(ray, RayExecutor) and ray.options()["resources"] == {"docker": 1}
    assert get_env_kind("local").node_needs(EnvConfig()) == NodeNeeds()


class FakeNodes:
    """Two nodes with their own image stores; run_each runs the node functions against them."""

    def __init__(self, held: dict[str, dict[str, str]]) -> None:
        self.held = held
        self.shared: list[bytes] = []
        self.calls: list[tuple[str, str]] = []

    def ids(self, resource: str | None = None) -> list[str]:
        assert resource == "docker"
        return sorted(self.held)

    def run_each(self, calls: Sequence[tuple[str, Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
        out: list[Any] = []
        for node, fn, args in calls:
            self.calls.append((node, fn.__name__))
            if fn is node_images.node_image_ids:
                out.append({ref: self.held[node].get(ref) for ref in args[0]})
            elif fn is node_images.load_image:
                ref, image_id = self.shared[args[0]].decode().split("=")
                self.held[node][ref] = image_id
                out.append([image_id])
            else:
                pytest.fail(f"unexpected node function {fn.__name__}")
        return out

    def share(self, data: bytes) -> int:
        self.shared.append(data)
        return len(self.shared) - 1


def test_the_docker_hook_ships_only_what_each_node_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    wanted = {"replaykit/base:bookworm": "sha256:aaa", "python:3.12-slim": "sha256:bbb"}
    monkeypatch.setattr(node_images, "wanted_images", lambda aliases: wanted if aliases else {})
    monkeypatch.setattr(node_images, "save_image", lambda ref: f"{ref}={wanted[ref]}".encode())
    nodes = FakeNodes(
        {"n1": {"replaykit/base:bookworm": "sha256:aaa"}, "n2": {"python:3.12-slim": "sha256:old"}}
    )
    section = EnvConfig.model_validate(
        {"kind": "docker", "image_aliases": {"python:3.12-slim": "x"}}
    )  # a config's env section
    needs = get_env_kind("docker").node_needs(section)
    assert needs.prepare is not None
    needs.prepare(nodes)
    assert nodes.held == {"n1": dict(wanted), "n2": dict(wanted)}
    assert len(nodes.shared) == 2  # each lacking image saved once, whatever the number of nodes
    assert node_images.ship_images(nodes, wanted) == {}  # held now: nothing is sent
