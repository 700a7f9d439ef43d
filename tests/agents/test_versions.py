"""How a Python agent's version is read from its console script: the interpreter its ``#!`` line
names, or the one pip's ``/bin/sh`` trampoline execs (a venv whose path is too long for ``#!``)."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from replaykit.agents.base import python_dist

PYTEST = importlib.metadata.version("pytest")


def script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent-cli"
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_the_shebang_interpreter_reports_the_distribution(tmp_path: Path) -> None:
    program = script(tmp_path, f"#!{sys.executable}\nimport sys\n")
    assert python_dist("pytest")(program) == PYTEST


def test_pips_sh_trampoline_names_the_interpreter(tmp_path: Path) -> None:
    trampoline = f"#!/bin/sh\n'''exec' \"{sys.executable}\" \"$0\" \"$@\"\n' '''\nimport sys\n"
    assert python_dist("pytest")(script(tmp_path, trampoline)) == PYTEST


def test_no_interpreter_or_no_distribution_is_unknown(tmp_path: Path) -> None:
    assert python_dist("pytest")(script(tmp_path, "echo hi\n")) == "unknown"
    program = script(tmp_path, f"#!{sys.executable}\n")
    assert python_dist("no-such-distribution-here")(program) == "unknown"
