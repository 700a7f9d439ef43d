"""Named agents: an outside agent (mini-swe-agent, Codex, a Terminus-like loop) run as the policy
of an episode, the way ``harbor run -a NAME -m MODEL`` does.

A :class:`NamedAgent` is data: its ``name``, the harness template it runs as (a folder whose files
become the agent's harness repository, committed with fixed author and dates, so its SHA, and the
cassettes keyed by it, are the same on every machine), what it needs on the host (a
:class:`Requirement`: a program with its one-line install command and how to read its version) and
a one-line description. ``register_agent(agent)`` adds one in-process; another package declares one
under the ``replaykit.agents`` entry-point group (the value: a ``NamedAgent``); ``get_agent(NAME)``
looks one up (an unknown name is one line listing the registered ones). A config selects one with
``harness.agent: NAME`` or ``replaykit run CONFIG --agent NAME``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from replaykit.core.errors import ConfigError, HarnessError
from replaykit.core.registry import Registry

#: folders searched for an agent's program before ``PATH`` (``os.pathsep``-separated);
#: ``scripts/setup-agents.sh`` installs each shipped agent in its own venv and prints this
AGENTS_PATH_VAR = "REPLAYKIT_AGENTS_PATH"
_VERSION = re.compile(r"\d+(?:\.\d+)+[\w.+-]*")


@dataclass(frozen=True)
class Requirement:
    """A program the agent runs on the host, looked up on ``$REPLAYKIT_AGENTS_PATH`` then ``PATH``."""

    program: str  # e.g. ``mini``
    install: str  # the one-line, pinned install command, shown when the program is missing
    #: the program's version: arguments that print it (the first ``N.N…`` of the output is taken) ...
    version_args: tuple[str, ...] = ("--version",)
    #: ... or a function of the program's path (a Python CLI: its distribution's version)
    read_version: Callable[[Path], str] | None = None

    def find(self) -> Path | None:
        extra = os.environ.get(AGENTS_PATH_VAR, "")
        for folder in [p for p in extra.split(os.pathsep) if p]:
            candidate = Path(folder) / self.program
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        found = shutil.which(self.program)
        return Path(found) if found else None

    def version_of(self, program: Path) -> str:
        if self.read_version is not None:
            return self.read_version(program)
        try:
            out = subprocess.run(
                [str(program), *self.version_args], capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired):
            return "unknown"
        found = _VERSION.search(out.stdout + out.stderr)
        return found.group(0) if found else "unknown"


@dataclass(frozen=True)
class NamedAgent:
    """One outside agent: what ``--agent NAME`` runs."""

    name: str
    template: Path  # the folder of files its harness repository is made from
    description: str
    requires: Requirement | None = None  # None: nothing outside replaykit's own venv
    entry: str = "harness.py"  # the template's ``solve(task, env, llm, ctx)``

    def program(self) -> Path | None:
        """The program it runs; one line with the install command when it is not installed."""
        if self.requires is None:
            return None
        found = self.requires.find()
        if found is None:
            raise HarnessError(
                f"agent {self.name!r} needs the program {self.requires.program!r}, not found on "
                f"${AGENTS_PATH_VAR} or PATH; install it: {self.requires.install}"
            )
        return found

    def version(self) -> str:
        """The installed version (``"builtin"`` for an agent that needs no program)."""
        program = self.program()
        if program is None or self.requires is None:
            return "builtin"
        return self.requires.version_of(program)


def python_dist(dist: str) -> Callable[[Path], str]:
    """A ``read_version`` for a Python package's console script: the version of ``dist`` in the
    interpreter its ``#!`` line names (the script's own venv), read without importing the package."""

    def read(program: Path) -> str:
        try:
            first = program.read_bytes()[:400].split(b"\n", 1)[0].decode()
            interpreter = first[2:].strip() if first.startswith("#!") else ""
            out = subprocess.run(
                [interpreter, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, UnicodeDecodeError, subprocess.TimeoutExpired):
            return "unknown"
        return out.stdout.strip() if out.returncode == 0 else "unknown"

    return read


def _as_agent(name: str, obj: object) -> NamedAgent:
    if not isinstance(obj, NamedAgent):
        raise ConfigError(f"agent {name!r} is a {type(obj).__name__}, not a replaykit NamedAgent")
    if obj.name != name:
        raise ConfigError(f"agent {name!r} is registered under another name ({obj.name!r})")
    return obj


AGENTS: Registry[NamedAgent] = Registry(
    "agent",
    "replaykit.agents",
    builtins={},
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
