"""Named agents: an outside agent (mini-swe-agent, Codex, a Terminus-like loop) run as the policy
of an episode, the way ``harbor run -a NAME -m MODEL`` does.

A :class:`~replaykit.agents.base.NamedAgent` (``base.py``) is data: its ``name``, the harness
template it runs as (a folder whose files become the agent's harness repository, committed with
fixed author and dates, so its SHA, and the cassettes keyed by it, are the same on every machine),
what it needs on the host (a :class:`~replaykit.agents.base.Requirement`: a program with its
one-line install command and how to read its version) and a one-line description.
``register_agent(agent)`` adds one in-process; another package declares one under the
``replaykit.agents`` entry-point group (the value: a ``NamedAgent``); ``get_agent(NAME)`` looks
one up (an unknown name is one line listing the registered ones). A config selects one with
``harness.agent: NAME`` or ``replaykit run CONFIG --agent NAME``.
"""

from __future__ import annotations

from replaykit.agents.base import NamedAgent
from replaykit.core.errors import ConfigError
from replaykit.core.registry import Registry


def _as_agent(name: str, obj: object) -> NamedAgent:
    if not isinstance(obj, NamedAgent):
        raise ConfigError(f"agent {name!r} is a {type(obj).__name__}, not a replaykit NamedAgent")
    if obj.name != name:
        raise ConfigError(f"agent {name!r} is registered under another name ({obj.name!r})")
    return obj


AGENTS: Registry[NamedAgent] = Registry(
    "agent",
    "replaykit.agents",
    builtins={
        "codex": "replaykit.agents.codex:CODEX",
        "mini-swe-agent": "replaykit.agents.mini_swe_agent:AGENT",
        "terminus": "replaykit.agents.terminus:AGENT",
    },
    convert=_as_agent,
)


def register_agent(agent: NamedAgent) -> NamedAgent:
    """Add ``agent`` under its name (a built-in or entry point of that name is hidden)."""
    return AGENTS.register(agent.name, agent)


def get_agent(name: str) -> NamedAgent:
    """The agent ``name``; an unknown one is one line listing the registered names."""
    return AGENTS.get(name)


def agent_names() -> list[str]:
    return AGENTS.names()
