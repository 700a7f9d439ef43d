"""What a named agent is (``registry.py`` holds them): its :class:`NamedAgent` record (name, the
harness template it runs as, what it needs on the host, its normalisation rules) and the
:class:`Requirement` of its program (where it is looked up, its one-line install command, how its
version is read, the one version it drives if it pins one). Agent modules (``codex/``) import
these, never the registry, so the registry's built-ins make no import cycle.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from replaykit.core.errors import HarnessError

#: folders searched for an agent's program before ``PATH`` (``os.pathsep``-separated);
#: ``scripts/setup-agents.sh`` installs each shipped agent in its own venv and prints this.
#: Unset, it is the folder that script links them into (:func:`default_agents_path`)
AGENTS_PATH_VAR = "REPLAYKIT_AGENTS_PATH"
_VERSION = re.compile(r"\d+(?:\.\d+)+[\w.+-]*")
_TRAMPOLINE = re.compile(r"^'''exec' \"?([^\"\n]+?)\"? \"\$0\"", re.M)


def default_agents_path() -> Path:
    """Where ``scripts/setup-agents.sh`` links each agent's program: ``$REPLAYKIT_AGENTS_HOME/bin``,
    by default ``~/.cache/replaykit/agents/bin`` (so a machine that ran it needs no export)."""
    home = os.environ.get("REPLAYKIT_AGENTS_HOME") or Path.home() / ".cache" / "replaykit" / "agents"
    return Path(home) / "bin"


@dataclass(frozen=True)
class Requirement:
    """A program the agent runs on the host, looked up on ``$REPLAYKIT_AGENTS_PATH`` then ``PATH``."""

    program: str  # e.g. ``mini``
    install: str  # the one-line, pinned install command, shown when the program is missing
    #: the program's version: arguments that print it (the first ``N.N…`` of the output is taken) ...
    version_args: tuple[str, ...] = ("--version",)
    #: ... or a function of the program's path (a Python CLI: its distribution's version)
    read_version: Callable[[Path], str] | None = None
    #: the one version the agent drives (its template pins it), None: any; another is refused
    #: before a recording starts (``NamedAgent.check``), in one line with ``install``
    exact: str | None = None

    def find(self) -> Path | None:
        extra = os.environ.get(AGENTS_PATH_VAR)
        folders = [str(default_agents_path())] if extra is None else extra.split(os.pathsep)
        for folder in [p for p in folders if p]:
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
    #: normalisation rules its requests need (``capture.matchers``), added to ``record.rules``
    rules: tuple[str, ...] = ()

    def repo_name(self) -> str:
        """Its harness repo's folder name: the name and the digest of the template's files, so a
        replaykit whose template changed makes a new repo (a new SHA) instead of running the old
        one under the same name; the old repo, and the cassettes keyed by its SHA, stay."""
        files = sorted(
            p
            for p in self.template.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )
        digest = hashlib.sha256()
        for path in files:
            digest.update(
                f"{path.relative_to(self.template).as_posix()}\0{path.stat().st_mode & 0o111}\0".encode()
            )
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        return f"{self.name}-{digest.hexdigest()[:12]}"

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

    def check(self) -> str:
        """The installed version, which must be the one it drives (``Requirement.exact``): else one
        line naming both and the install command."""
        found = self.version()
        exact = self.requires.exact if self.requires is not None else None
        if exact is not None and found != exact:
            assert self.requires is not None
            raise HarnessError(
                f"agent {self.name!r} drives {self.requires.program} {exact} (what its recordings "
                f"hold); {self.program()} is {found}; install {exact}: {self.requires.install}"
            )
        return found


def python_dist(dist: str) -> Callable[[Path], str]:
    """A ``read_version`` for a Python package's console script: the version of ``dist`` in the
    interpreter its ``#!`` line names (the script's own venv), read without importing the package."""

    def read(program: Path) -> str:
        try:
            head = program.read_bytes()[:1000].decode()
            first = head.split("\n", 1)[0]
            interpreter = first[2:].strip() if first.startswith("#!") else ""
            # pip's trampoline for a long interpreter path: "#!/bin/sh", then "'''exec' PATH "$0" ..."
            if trampoline := _TRAMPOLINE.search(head):
                interpreter = trampoline.group(1)
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
