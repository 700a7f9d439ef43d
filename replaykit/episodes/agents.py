"""A named agent in a run (``harness.agent``, ``run --agent``): its identity for the episodes it
records, and what a reuse or a replay under another installed version says.

The agent's harness repo is made from its template (``episodes/config.py``), so its cassettes are
keyed by that SHA like any harness's; the agent's name and installed version are kept in each
episode's meta (``agent``), never in its key: another version of the program reuses and replays
the same cassettes, and says so in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from replaykit.agents.registry import get_agent
from replaykit.cassette.backend import EpisodeStore
from replaykit.core.errors import ConfigError
from replaykit.core.meta import AgentMeta, EpisodeMeta

#: what recording a named agent in the local kind says, once per run: nothing on this machine
#: separates the agent's process from the commands it runs (docker does)
LOCAL_AGENT_NOTE = (
    "local-kind agents are not isolated: the task's commands run as the same user beside the agent "
    "and can read its process; its bridge still admits only the agent's own connections "
    "(env.kind: docker keeps them apart)"
)


def agent_identity(name: str | None, needed: bool = True) -> AgentMeta | None:
    """``name``'s identity (its installed version). ``needed``: its program must be installed
    (one line with the install command when not), else an absent one is version ``"absent"``."""
    if name is None:
        return None
    agent = get_agent(name)
    if not needed and agent.requires is not None and agent.requires.find() is None:
        return AgentMeta(name=name, version="absent")
    return AgentMeta(name=name, version=agent.check() if needed else agent.version())


def require_program(meta: EpisodeMeta, checked: set[str]) -> None:
    """Replaying a named agent's episode runs its program again: when it is not installed, one
    line with its install command (never a divergence blamed on the recording)."""
    recorded = meta.get("agent")
    if recorded is not None and recorded["name"] not in checked:
        get_agent(recorded["name"]).program()
        checked.add(recorded["name"])


def version_note(metas: Iterable[EpisodeMeta], doing: str, installed: AgentMeta | None = None) -> str | None:
    """One line when episodes ``doing`` (``reused``, ``replayed``) were recorded under another
    version of their agent than the one installed here (``installed``, else looked up by the
    recorded name); None when every one matches or none names an agent."""
    counts: dict[tuple[str, str], int] = {}
    for meta in metas:
        recorded = meta.get("agent")
        if recorded is not None:
            pair = (recorded["name"], recorded["version"])
            counts[pair] = counts.get(pair, 0) + 1
    parts = []
    for name in sorted({n for n, _ in counts}):
        mine = installed["version"] if installed and installed["name"] == name else _installed(name)
        others = {v: n for (a, v), n in counts.items() if a == name and v != mine}
        if others:
            versions = ", ".join(f"{v} ({n})" for v, n in sorted(others.items()))
            parts.append(
                f"{doing} {sum(others.values())} episode(s) of agent {name!r} recorded under "
                f"version {versions}; installed here: {mine}"
            )
    return "; ".join(parts) or None


def _installed(name: str) -> str:
    try:
        found = agent_identity(name, needed=False)
    except ConfigError:  # recorded by a plugin agent this machine does not have
        return "not registered"
    return found["version"] if found else "absent"


def reuse_note(
    store: EpisodeStore, reused: list[str], agent: AgentMeta | None, warn: Callable[[str], None]
) -> None:
    """``warn`` the ``version_note`` of the episodes a run of ``agent`` reuses, if any."""
    if agent is not None and reused:
        if note := version_note((store.get_episode(cid).meta for cid in reused), "reused", agent):
            warn(note)
