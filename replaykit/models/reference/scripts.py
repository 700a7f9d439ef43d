"""What the simulated models run for a task: ``solve.sh`` line by line, or as one script.

A ``solve.sh`` made of independent one-line commands (the sample tasks' rule) is
played one line per tool call, so weaker simulated models can err on single steps.
Any script where that could change its meaning is played as **one** call that runs
the whole script with ``bash``: heredocs, multi-line constructs (``if``/``for``/
functions/``{ }``, open quotes or pipes), variables or ``cd`` carried between lines,
``exit``, ``$0``/``$SOLUTION_DIR``, other files in ``solution/``, or a literal
``[solution.env]``. When ``solution/`` holds more than ``solve.sh`` (or the script
names ``$SOLUTION_DIR``), the command unpacks the folder (a deterministic base64
tar.gz in a quoted heredoc) into a temporary directory and runs
``SOLUTION_DIR=<dir> bash <dir>/solve.sh`` there, from the workdir. Host-templated
``[solution.env]`` values (``${NAME}``) are not passed: the model never sees secrets.
"""

from __future__ import annotations

import base64
import gzip
import io
import re
import shlex
import tarfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from replaykit.core.determinism import normal_tarinfo

_SET_LINE_RE = re.compile(r"^set\s+[-+]")
_KEYWORDS = re.compile(
    r"^(if|then|else|elif|fi|for|while|until|do|done|case|esac|select|function|[{}]|\(|\))(\s|$|;)"
)
_STATEFUL = re.compile(
    r"^(cd|pushd|popd|export|local|declare|readonly|source|\.|alias|trap|exit|return|shopt|set|unset|umask)(\s|$)"
)
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_SPECIAL = re.compile(r"\$\{?(0|SOLUTION_DIR|BASH_SOURCE)\b|<<")
_NEEDS_DIR = re.compile(r"\$\{?(0|SOLUTION_DIR|BASH_SOURCE)\b")
_CONTINUES = ("&&", "||", "|", "(", "{", "\\")
_TEMPLATE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(:-.*)?\}$")


def solution_steps(script: str) -> tuple[str, ...]:
    """The steps of a ``solve.sh``: its non-empty, non-comment lines.

    The shebang, comments and ``set -e``-style lines are skipped; a line ending
    in ``\\`` is joined with the next one.
    """
    steps: list[str] = []
    pending = ""
    for raw in script.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        if not line or line.startswith("#") or _SET_LINE_RE.match(line):
            continue
        steps.append(line)
    if pending.strip():
        steps.append(pending.strip())
    return tuple(steps)


def splittable(script: str) -> bool:
    """True when running the lines one by one (as separate ``bash -c``) means the same as the script."""
    for line in solution_steps(script):
        if _KEYWORDS.match(line) or _SPECIAL.search(line) or line.endswith(_CONTINUES) or line.endswith(" &"):
            return False
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # an open quote: a multi-line string
            return False
        chained = any(op in line for op in ("&&", "||", ";"))
        if _STATEFUL.match(line) and not chained:
            return False  # `cd dir`, `export X=1`, `exit` alone: their effect is meant for later lines
        if words and all(_ASSIGN.match(w) for w in words):
            return False  # `X=1` alone: a variable carried to later lines
    return True


def _tar_gz(folder: Path) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in folder.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(folder).as_posix())
            normal_tarinfo(info, mtime=0)
            if path.is_file() and not path.is_symlink():
                tar.addfile(info, io.BytesIO(path.read_bytes()))
            else:
                tar.addfile(info)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def literal_env(tables: Sequence[Mapping[str, object]]) -> dict[str, str]:
    """Literal (non-templated) values of ``[solution.env]`` tables, later tables winning."""
    env: dict[str, str] = {}
    for table in tables:
        for key, value in table.items():
            if isinstance(value, str) and not _TEMPLATE.match(value):
                env[key] = value
    return env


def solution_env(task_dir: Path, step: str | None) -> dict[str, str]:
    try:
        config = tomllib.loads((task_dir / "task.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    tables = [(config.get("solution") or {}).get("env") or {}]
    for table in config.get("steps") or []:
        if isinstance(table, dict) and table.get("name") == step:
            tables.append((table.get("solution") or {}).get("env") or {})
    return literal_env([t for t in tables if isinstance(t, dict)])


def script_steps(solution_dir: Path, env: dict[str, str]) -> tuple[str, ...]:
    """The commands a simulated model runs for the solution in ``solution_dir``."""
    solve = solution_dir / "solve.sh"
    if not solve.is_file():
        return ()
    script = solve.read_text(encoding="utf-8")
    others = [p for p in solution_dir.rglob("*") if p.is_file() and p != solve]
    if not others and not env and splittable(script):
        return solution_steps(script)
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
    if not others and not _NEEDS_DIR.search(script):
        return ((exports + script).rstrip("\n"),)
    blob = base64.encodebytes(_tar_gz(solution_dir)).decode("ascii")
    return (
        exports
        + 'd=$(mktemp -d) && base64 -d > "$d/s.tgz" <<\'REPLAYKIT_SOLUTION\' && tar -xzf "$d/s.tgz" -C "$d" && rm "$d/s.tgz"\n'
        + blob
        + "REPLAYKIT_SOLUTION\n"
        + 'SOLUTION_DIR="$d" bash "$d/solve.sh"; rc=$?; rm -rf "$d"; exit $rc',
    )
