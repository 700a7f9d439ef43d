"""Harbor's three ``env`` tables of task.toml, with Harbor's host-variable templating.

* ``[environment.env]``: variables of every process in the environment (agent
  actions, the oracle, the verifier);
* ``[verifier.env]``: added for the verifier (``tests/test.sh``) only;
* ``[solution.env]``: added for the oracle (``solution/solve.sh``) only.

A value that is exactly ``${NAME}`` or ``${NAME:-default}`` is taken from the host
environment when replaykit starts the environment (Harbor's ``resolve_env_vars``);
an unset ``NAME`` without a default is a ``TaskError`` naming the table and the key.
Any other value is literal. Values that came from the host are **configured
secrets**: environments replace them with ``<secret:NAME>`` in every observation
and verifier detail they return, so they never reach a cassette, a bundle or a log
(a default written in task.toml is part of the task, not a secret).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replaykit.core.errors import TaskError

#: The tables that may hold an ``env`` sub-table.
ENV_SECTIONS: tuple[str, ...] = ("environment", "verifier", "solution")
TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Variables replaykit sets itself; a task's env table may not redefine them.
RESERVED: frozenset[str] = frozenset({"APP_DIR", "TESTS_DIR", "LOGS_DIR", "SOLUTION_DIR"})
_MIN_SECRET_CHARS = 4  # shorter values would scrub ordinary text


@dataclass(frozen=True)
class ResolvedEnv:
    """Variables for a process, and which of their values came from the host (secrets)."""

    values: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)

    def merged(self, other: "ResolvedEnv") -> "ResolvedEnv":
        return ResolvedEnv({**self.values, **other.values}, {**self.secrets, **other.secrets})


def env_table(config: Mapping[str, Any], section: str) -> dict[str, str]:
    """The raw ``[section.env]`` table of a parsed task.toml (or step table); {} when absent."""
    table = config.get(section)
    env = table.get("env") if isinstance(table, dict) else None
    return dict(env) if isinstance(env, dict) else {}


def validate_env_tables(config: Mapping[str, Any], where: str) -> None:
    """Each env table is a table of string values with shell-variable names; ``TaskError`` otherwise."""
    for section in ENV_SECTIONS:
        table = config.get(section)
        if not isinstance(table, dict) or "env" not in table:
            continue
        env = table["env"]
        if not isinstance(env, dict):
            raise TaskError(f"{where}: field '{section}.env' must be a table ([{section}.env]), got {env!r}")
        for key, value in env.items():
            if not _NAME.match(key):
                raise TaskError(f"{where}: field '{section}.env.{key}' is not a valid variable name")
            if key in RESERVED:
                raise TaskError(
                    f"{where}: field '{section}.env.{key}' is set by replaykit itself; rename the variable"
                )
            if not isinstance(value, str):
                raise TaskError(f"{where}: field '{section}.env.{key}' must be a string, got {value!r}")


def resolve(table: Mapping[str, str], label: str, environ: Mapping[str, str] | None = None) -> ResolvedEnv:
    """Resolve one env table against the host environment (``label`` names it in errors)."""
    host = os.environ if environ is None else environ
    values: dict[str, str] = {}
    secrets: dict[str, str] = {}
    for key, value in table.items():
        match = TEMPLATE.fullmatch(value)
        if match is None:
            values[key] = value
            continue
        name, default = match.group(1), match.group(2)
        if name in host:
            values[key] = host[name]
            secrets[key] = host[name]
        elif default is not None:
            values[key] = default
        else:
            raise TaskError(
                f"{label}: {key} = '${{{name}}}' needs the host variable {name}, which is not set; "
                f"export it (or give a default: ${{{name}:-value}})"
            )
    return ResolvedEnv(values, secrets)


def task_env(task_path: Path, config: Mapping[str, Any], section: str) -> ResolvedEnv:
    return resolve(env_table(config, section), f"{task_path / 'task.toml'} [{section}.env]")


def scrub(text: str, secrets: Mapping[str, str]) -> str:
    """Replace every configured secret value in ``text`` with ``<secret:NAME>``."""
    for name, value in sorted(secrets.items(), key=lambda kv: -len(kv[1])):
        if len(value) >= _MIN_SECRET_CHARS and value in text:
            text = text.replace(value, f"<secret:{name}>")
    return text
