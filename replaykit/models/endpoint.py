"""Where a config's model lives: the built-in reference server or a real endpoint.

``base_url: builtin`` starts the reference model server in-process on a free
loopback port for the duration; its identity in cassette keys is ``builtin``, never
the port. Any OpenAI-compatible URL is used as it is; its API key comes from the
environment variable the config names and never reaches a cassette.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from replaykit.cassette.keys import ModelId
from replaykit.core.errors import ConfigError
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


def model_id(cfg: ModelConfig) -> ModelId:
    endpoint = BUILTIN if cfg.base_url == BUILTIN else cfg.base_url.rstrip("/")
    revision = cfg.revision or ("sim-1" if cfg.base_url == BUILTIN else "")
    return ModelId(name=cfg.name, endpoint=endpoint, revision=revision)


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
