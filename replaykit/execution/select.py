"""The executor a config's ``executor`` section, or the CLI's ``--workers``/``--ray``, names."""

from __future__ import annotations

from replaykit.envs.base import NodeNeeds
from replaykit.execution.config import ExecutorConfig
from replaykit.execution.executor import Executor
from replaykit.execution.registry import EXECUTORS


def make_executor(config: ExecutorConfig, needs: NodeNeeds | None = None) -> Executor:
    """The executor kind ``config.kind`` names, for episodes with these ``needs`` (what their
    environment kind asks of worker nodes: ``EnvKind.node_needs``)."""
    return EXECUTORS.get(config.kind)(config, needs or NodeNeeds())


def cli_executor(workers: int | None = None, ray_address: str | None = None) -> Executor | None:
    """The executor of ``--workers N`` / ``--ray ADDRESS`` (None: inline)."""
    if ray_address:
        return make_executor(ExecutorConfig(kind="ray", address=ray_address))
    if workers and workers > 1:
        return make_executor(ExecutorConfig(kind="local", workers=workers))
    return None
