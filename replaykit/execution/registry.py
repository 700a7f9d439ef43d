"""Executor kinds by name: ``executor.kind`` in a config, ``--executor KIND[:k=v,…]`` (or
``--workers``/``--ray``) on the CLI.

An executor kind is an :class:`~replaykit.execution.settings.ExecutorKind` (``ExecutorKind[S]``):
a factory ``(settings: S, needs) -> Executor`` and ``S``, the model of its own keys (the config's
``executor`` keys beside ``kind``, validated at load and handed over typed; ``needs``: what
the episodes' environment kind asks of a worker node, ``envs.base.NodeNeeds``). Built-ins:
``local`` (inline or a fork pool) and ``ray``; others come from
``register_executor(kind, factory, settings)`` or the ``replaykit.executors`` entry-point
group (an ``ExecutorKind``, or a bare factory: a kind with no keys of its own).
``select.py`` builds the executor a config or the CLI names.
"""

from __future__ import annotations

from typing import Any, cast

from replaykit.core.errors import ConfigError
from replaykit.core.registry import Registry
from replaykit.execution.settings import ExecutorFactory, ExecutorKind, ExecutorSettings, S

#: a kind of any settings model: ``build`` checks that the settings are its own before the
#: factory gets them
RegisteredExecutorKind = ExecutorKind[Any]


def _as_kind(name: str, obj: object) -> RegisteredExecutorKind:
    if isinstance(obj, ExecutorKind):
        return obj
    if callable(obj):  # an entry point's bare factory: a kind with no keys of its own
        return ExecutorKind(cast(ExecutorFactory, obj))
    raise ConfigError(
        f"executor kind {name!r}: expected an ExecutorKind or a factory, got {type(obj).__name__}"
    )


EXECUTORS: Registry[RegisteredExecutorKind] = Registry(
    "executor kind",
    "replaykit.executors",
    builtins={
        "local": "replaykit.execution.executor:LOCAL",
        "ray": "replaykit.execution.ray_executor:RAY",
    },
    convert=_as_kind,
    error=ConfigError,
)


def register_executor(
    kind: str,
    factory: ExecutorFactory[S],
    settings: type[S] = ExecutorSettings,  # type: ignore[assignment]  # no keys of its own: ExecutorKind[ExecutorSettings]
) -> ExecutorKind[S]:
    """Make ``executor.kind: <kind>`` usable in configs (replaces a kind of the same name);
    ``settings``: the model of the kind's own keys."""
    return EXECUTORS.register(kind, ExecutorKind(factory, settings))
