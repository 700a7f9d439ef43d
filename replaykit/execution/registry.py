"""Executor kinds by name: ``executor.kind`` in a config, ``--workers``/``--ray`` on the CLI.

An executor kind is a factory ``(config, needs) -> Executor``: ``config`` is the
config's ``executor`` section (``ExecutorConfig``), ``needs`` what the episodes'
environment kind asks of a worker node (``envs.base.NodeNeeds``: a custom resource to
schedule on, a hook that prepares each node — Docker's base images, for one). Built-ins:
``local`` (inline or a fork pool) and ``ray``; others come from
``register_executor(kind, factory)`` or the ``replaykit.executors`` entry-point group.
``select.py`` builds the executor a config or the CLI names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from replaykit.core.errors import ConfigError
from replaykit.core.registry import Registry
from replaykit.envs.base import NodeNeeds

if TYPE_CHECKING:
    from replaykit.execution.config import ExecutorConfig
    from replaykit.execution.executor import Executor

ExecutorFactory = Callable[["ExecutorConfig", NodeNeeds], "Executor"]

EXECUTORS: Registry[ExecutorFactory] = Registry(
    "executor kind",
    "replaykit.executors",
    builtins={
        "local": "replaykit.execution.executor:local_executor",
        "ray": "replaykit.execution.ray_executor:ray_executor",
    },
    error=ConfigError,
)


def register_executor(kind: str, factory: ExecutorFactory) -> ExecutorFactory:
    """Make ``executor.kind: <kind>`` usable in configs (replaces a kind of the same name)."""
    return EXECUTORS.register(kind, factory)
