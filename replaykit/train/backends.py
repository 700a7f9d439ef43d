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

from replaykit.core.deprecation import moved_name
from replaykit.core.registry import Registry

if TYPE_CHECKING:
    from replaykit.models.session import ProposalSession


@runtime_checkable
class AgentBackend(Protocol):
    """Registered by name so configs can select one (``train.backend.kind``)."""

    kind: str
    model: str  # the model name (part of the proposer cassette key)
    base_url: str  # "builtin" or an OpenAI-compatible URL (part of the key, never a port)

    def propose(self, workdir: Path, brief: str, session: ProposalSession) -> str: ...


BACKENDS: Registry[Callable[..., AgentBackend]] = Registry(
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
    """The agent backend ``kind`` with ``params`` (checked against its signature: ``Registry.create``)."""
    backend: AgentBackend = BACKENDS.create(kind, **params)
    return backend


def __getattr__(name: str) -> object:
    """``ProposalSession`` moved to :mod:`replaykit.models.session` (a deprecated alias here)."""
    return moved_name(__name__, name)
