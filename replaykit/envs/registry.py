"""Environment kinds, registered by name beside the protocol they implement (``base.py``).

An environment kind is one :class:`EnvKind` (``EnvKind[S]``, ``S`` its settings model): a
``factory`` that builds one episode's :class:`~replaykit.envs.base.Environment`, an optional ``key_extra``
(identity the kind adds to cassette keys, e.g. the Docker image ID) and an
optional ``oracle`` (``replaykit tasks check``: grade a task untouched, then
solved). Configs select a kind with ``env.kind``; the rollout, ``tasks check`` and
``certify`` dispatch through :func:`get_env_kind` only.

The kind itself is always the first item of the cassette key's extras, so a new
kind never reuses another kind's cassettes.

Add a kind with one file: ``register_env("mine", factory, key_extra=..., oracle=...)``
at run time, or from another package through the ``replaykit.envs`` entry-point
group (the entry point names an ``EnvKind`` or a factory).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, cast

from replaykit.core.errors import EnvError
from replaykit.core.registry import Registry
from replaykit.envs.base import (
    EnvFactory,
    Environment,
    EnvKind,
    EnvRequest,
    EnvSection,
    EnvSettings,
    KeyExtra,
    KeyPairs,
    Oracle,
    S,
)

if TYPE_CHECKING:
    from replaykit.envs.tasks import Task

#: a kind of any settings model: its methods (``build``, ``key``, ``section``…) check that a
#: section's settings are its own before a hook gets them
RegisteredEnvKind = EnvKind[Any]


def _as_kind(name: str, obj: object) -> RegisteredEnvKind:
    if isinstance(obj, EnvKind):
        return obj if obj.kind == name else dataclasses.replace(obj, kind=name)
    if callable(obj):  # an entry point's bare factory: a kind with no keys of its own
        return EnvKind(name, cast(EnvFactory, obj))
    raise EnvError(f"environment kind {name!r}: expected an EnvKind or a factory, got {type(obj).__name__}")


ENVIRONMENTS: Registry[RegisteredEnvKind] = Registry(
    "environment kind",
    "replaykit.envs",
    builtins={"local": "replaykit.envs.local:ENV", "docker": "replaykit.envs.docker.kind:ENV"},
    convert=_as_kind,
    error=EnvError,
)


def register_env(
    kind: str,
    factory: EnvFactory[S],
    key_extra: KeyExtra[S] | None = None,
    oracle: Oracle[S] | None = None,
    *,
    settings: type[S] = EnvSettings,  # type: ignore[assignment]  # no keys of its own: EnvKind[EnvSettings]
    reexecutable: bool = True,
) -> EnvKind[S]:
    """Make ``env.kind: <kind>`` usable in configs (replaces a kind of the same name);
    ``settings``: the kind's own ``env`` keys, a pydantic model (see ``EnvSettings``);
    ``reexecutable=False``: its recorded actions cannot run again (regrade needs full snapshots)."""
    return ENVIRONMENTS.register(
        kind, EnvKind(kind, factory, key_extra, oracle, settings=settings, reexecutable=reexecutable)
    )


def get_env_kind(kind: str) -> RegisteredEnvKind:
    return ENVIRONMENTS.get(kind)


def uses_docker(kind: str) -> bool:
    """Whether an environment kind runs in Docker (False for a kind that is not installed)."""
    try:
        return get_env_kind(kind).uses_docker
    except EnvError:
        return False


def env_kind_of(env: EnvSection) -> RegisteredEnvKind:
    return get_env_kind(env.kind)


def env_key_extra(env: EnvSection, task: Task, replaying: bool = False) -> KeyPairs:
    """The environment's part of a cassette key (kind first, then the kind's extras;
    ``replaying``: derived without preparing anything, e.g. building an image)."""
    return env_kind_of(env).key(env, task, replaying)


def make_env(request: EnvRequest) -> Environment:
    """Build one episode's environment of the kind its ``env`` config names."""
    return env_kind_of(request.env).build(request)
