"""Where a config's model lives: the built-in reference server or a real endpoint.

``base_url: builtin`` starts the reference model server in-process on a free
loopback port for the duration; its identity in cassette keys is ``builtin``, never
the port. Any OpenAI-compatible URL is used as it is; its API key comes from the
environment variable the config names and never reaches a cassette. What names a model in
cassette keys is :func:`model_id`: what serves it, never where it listens.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from replaykit.cassette.keys import ModelId
from replaykit.core.errors import ConfigError
from replaykit.core.records import JSON
from replaykit.models.config import ModelConfig

BUILTIN = "builtin"
BUILTIN_KEY = "sk-reference-simulator"
OFFLINE_BASE_URL = (
    "http://127.0.0.1:9/v1"  # the discard port: nothing listens; a replay never needs an endpoint
)


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    api_key: str


def model_id(cfg: ModelConfig, engine: Mapping[str, JSON] | None = None) -> ModelId:
    """The model as cassette keys name it: its name, its declared revision and what serves it
    (``served_by``), given the ``engine`` identity measured from the endpoint (None: not measured)."""
    revision = cfg.revision or ("sim-1" if cfg.base_url == BUILTIN else "")
    return ModelId(name=cfg.name, endpoint=served_by(cfg.base_url, engine), revision=revision)


def served_by(base_url: str, engine: Mapping[str, JSON] | None = None) -> str:
    """What serves a model, never where it listens: ``builtin``; a self-hosted engine measured
    with the canary by its identity, ``engine:<digest>`` (the same engine on another port, host or
    machine is the same); anything else by its URL as a service (``capture.upstream``: no port, every
    loopback name ``localhost``), e.g. ``https://api.openai.com/v1``."""
    from replaykit.capture.upstream import upstream_identity  # (imports kept off the CLI's start)
    from replaykit.models.identity import identity_digest, measured_engine

    if base_url == BUILTIN:
        return BUILTIN
    if measured_engine(engine):
        return "engine:" + identity_digest(engine)
    return upstream_identity(base_url)


def is_engine(endpoint: str) -> bool:
    """Does a key's model ``endpoint`` name a measured engine (format 2)?"""
    return endpoint.startswith("engine:")


def api_key(cfg: ModelConfig) -> str:
    """The key for ``cfg``'s endpoint. An unset ``api_key_env`` variable is an error, never a
    placeholder sent silently; ``api_key_env: ""`` declares an endpoint that needs no key."""
    if cfg.base_url == BUILTIN:
        return BUILTIN_KEY
    if not cfg.api_key_env:
        return ""
    value = os.environ.get(cfg.api_key_env, "")
    if not value:
        raise ConfigError(
            f"model {cfg.name!r} at {cfg.base_url}: ${cfg.api_key_env} (model.api_key_env) is not set; "
            f'export it, or set model.api_key_env: "" for an endpoint that needs no key'
        )
    return value


@contextlib.contextmanager
def open_endpoint(cfg: ModelConfig, task_dirs: Sequence[Path] | None = None) -> Iterator[Endpoint]:
    """The endpoint for ``cfg``; the built-in server is handed ``task_dirs`` (the panel's task
    folders; None: the repository's ``envs/``), so it knows the tasks it is asked about."""
    if cfg.base_url != BUILTIN:
        yield Endpoint(cfg.base_url.rstrip("/"), api_key(cfg))
        return
    from replaykit.models.reference.server import ReferenceServer

    with ReferenceServer(task_dirs=None if task_dirs is None else [Path(d) for d in task_dirs]) as server:
        yield Endpoint(server.base_url, BUILTIN_KEY)
