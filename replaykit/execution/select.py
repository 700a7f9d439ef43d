"""The executor a config's ``executor`` section, or the CLI's ``--executor`` (``--workers``,
``--ray``), names."""

from __future__ import annotations

from replaykit.core.errors import ConfigError
from replaykit.envs.base import NodeNeeds
from replaykit.execution.config import ExecutorConfig, parse_executor
from replaykit.execution.registry import EXECUTORS
from replaykit.execution.settings import Executor


def make_executor(config: ExecutorConfig, needs: NodeNeeds | None = None) -> Executor:
    """The executor kind ``config.kind`` names, built from its typed settings, for episodes
    with these ``needs`` (what their environment kind asks of worker nodes: ``EnvKind.node_needs``)."""
    return EXECUTORS.get(config.kind).build(config.settings, needs or NodeNeeds())


def cli_section(
    workers: int | None = None, ray_address: str | None = None, executor: str | None = None
) -> ExecutorConfig | None:
    """The ``executor`` section ``--executor KIND[:k=v,…]``, ``--workers N`` or ``--ray ADDRESS``
    name (None: none given); one line when they contradict each other or are wrong."""
    given = [
        name
        for name, value in (("--executor", executor), ("--workers", workers), ("--ray", ray_address))
        if value
    ]
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(given)} both name an executor; give one")
    if executor:
        return parse_executor(executor)
    if ray_address:
        return ExecutorConfig.model_validate({"kind": "ray", "address": ray_address})
    if workers and workers > 1:
        return ExecutorConfig.model_validate({"kind": "local", "workers": workers})
    return None


def cli_executor(
    workers: int | None = None, ray_address: str | None = None, executor: str | None = None
) -> Executor | None:
    """The executor the CLI's options name (None: inline)."""
    section = cli_section(workers, ray_address, executor)
    return None if section is None else make_executor(section)
