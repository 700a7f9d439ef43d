"""Executor kinds by name (local, ray, registered, entry points), and the env kind's
worker-node hook: what a kind asks of the nodes reaches the executor, and Docker's
base-image shipping runs behind that hook, with no Docker knowledge in the executor."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from replaykit.core.errors import ConfigError
from replaykit.envs.base import NodeNeeds
from replaykit.envs.docker import node_images
from replaykit.envs.registry import get_env_kind
from replaykit.episodes.run import measure
from replaykit.execution.config import ExecutorConfig
from replaykit.execution.executor import LocalExecutor
from replaykit.execution.ray_executor import RayExecutor
from replaykit.execution.registry import EXECUTORS, register_executor
from replaykit.execution.select import cli_executor, make_executor
from replaykit.testing import small_config

pytestmark = pytest.mark.unit


def test_builtin_kinds_by_name_and_unknown_is_one_line() -> None:
    assert {"local", "ray"} <= set(EXECUTORS.names())
    assert isinstance(make_executor(ExecutorConfig(workers=1)), LocalExecutor)
    ray = make_executor(ExecutorConfig(kind="ray", address="ray://head:10001", cpus=2, resources={"gpu": 1}))
    assert isinstance(ray, RayExecutor) and ray.address == "ray://head:10001"
    assert ray.options()["resources"] == {"gpu": 1} and ray.options()["num_cpus"] == 2
    assert isinstance(cli_executor(ray_address="local"), RayExecutor) and cli_executor() is None
    with pytest.raises(ValueError, match=r"unknown executor kind 'slurm'; known: .*local.*ray"):
        ExecutorConfig(kind="slurm")


def test_a_config_naming_an_unknown_executor_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"field 'executor.kind': unknown executor kind 'slurm'"):
        small_config(tmp_path, tasks=["hello-file"], seeds=[0], **{"executor.kind": "slurm"})


class Inline:
    """A registered executor kind that remembers what it was given."""

    seen: ClassVar[list[tuple[ExecutorConfig, NodeNeeds, int]]] = []

    def __init__(self, config: ExecutorConfig, needs: NodeNeeds) -> None:
        self.config, self.needs = config, needs

    def map(
        self, fn: Callable[[Any], Any], jobs: Iterable[Any], batch: bool = False
    ) -> Iterator[tuple[Any, Any]]:
        jobs = list(jobs)
        Inline.seen.append((self.config, self.needs, len(jobs)))
        for job in jobs:
            yield job, fn(job)


def test_a_registered_executor_kind_runs_the_panel(tmp_path: Path) -> None:
    register_executor("inline-test", Inline)
    try:
        config = small_config(
            tmp_path, tasks=["hello-file"], seeds=[0, 1], **{"executor.kind": "inline-test"}
        )
        result = measure(config)
    finally:
        EXECUTORS.unregister("inline-test")
    assert len(result.recorded) == 2
    (cfg, needs, jobs), *_ = Inline.seen
    assert cfg.kind == "inline-test" and jobs == 2
    assert needs == NodeNeeds()  # the local env kind asks nothing of worker nodes


def test_the_docker_kind_asks_for_its_resource_and_a_node_hook() -> None:
    env: Any = {
        "kind": "docker",
        "image_aliases": {"debian:12": "replaykit/base:bookworm"},
    }  # a config's env table
    needs = get_env_kind("docker").node_needs(env)
    assert needs.resource == "docker" and needs.prepare is not None
    from replaykit.execution.ray_executor import RayExecutor

    ray = make_executor(ExecutorConfig(kind="ray"), needs)
    assert isinstance(ray, RayExecutor) and ray.options()["resources"] == {"docker": 1}
    assert get_env_kind("local").node_needs({"kind": "local"}) == NodeNeeds()


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
    table: Any = {"kind": "docker", "image_aliases": {"python:3.12-slim": "x"}}  # a config's env table
    needs = get_env_kind("docker").node_needs(table)
    assert needs.prepare is not None
    needs.prepare(nodes)
    assert nodes.held == {"n1": dict(wanted), "n2": dict(wanted)}
    assert len(nodes.shared) == 2  # each lacking image saved once, whatever the number of nodes
    assert node_images.ship_images(nodes, wanted) == {}  # held now: nothing is sent
