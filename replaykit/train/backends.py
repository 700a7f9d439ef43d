"""Agent backends: what an estimator uses to turn a brief into edits of a worktree.

A backend edits files in ``workdir`` (a git worktree of the baseline) and returns
a short summary. Every model call it makes goes through ``session``: in-process
clients are intercepted by the episode cassette (``session.cassette()``); external
agents (a CLI in another process) go through the recording proxy bound to the
same tape. When ``session.replaying`` the tape serves every response and nothing
touches the network.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, model_validator

from replaykit.core.deprecation import moved_name
from replaykit.core.errors import ConfigError
from replaykit.core.registry import FactoryRegistry

if TYPE_CHECKING:
    from replaykit.models.session import ProposalSession


@runtime_checkable
class AgentBackend(Protocol):
    """Registered by name so configs can select one (``train.backend.kind``)."""

    kind: str
    model: str  # the model name (part of the proposer cassette key)
    base_url: str  # "builtin" or an OpenAI-compatible URL (part of the key, never a port)

    def propose(self, workdir: Path, brief: str, session: ProposalSession) -> str: ...


BACKENDS: FactoryRegistry[AgentBackend] = FactoryRegistry(
    "agent backend",
    "replaykit.backends",
    builtins={
        "openai": "replaykit.train.openai_backend:OpenAIBackend",
        "codex": "replaykit.models.codex:CodexAgentBackend",
    },
)


def register_backend(kind: str, factory: Callable[..., AgentBackend]) -> None:
    BACKENDS.register(kind, factory)


def make_backend(kind: str, **params: Any) -> AgentBackend:
    """The agent backend ``kind`` with ``params`` (validated against its signature: ``FactoryRegistry.create``)."""
    backend: AgentBackend = BACKENDS.create(kind, **params)
    return backend


def __getattr__(name: str) -> object:
    """``ProposalSession`` moved to :mod:`replaykit.models.session` (a deprecated alias here)."""
    return moved_name(__name__, name)


class BackendSpec(BaseModel):
    """An agent backend by ``kind`` and its parameters (``train.estimator.backend``), the
    parameters validated strictly against the backend's signature."""

    model_config = ConfigDict(extra="allow")
    kind: str = "openai"

    @model_validator(mode="after")
    def _params(self) -> BackendSpec:
        try:
            self.__pydantic_extra__ = BACKENDS.validate(self.kind, self.model_extra or {})
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    def build(self) -> AgentBackend:
        return make_backend(self.kind, **(self.model_extra or {}))
