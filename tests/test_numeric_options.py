"""Every numeric option of every command refuses a value out of its range in one line, exit 2,
before the command does anything (issue 38 item 9: ``replay RUN --workers -1`` said identical).

The options are enumerated from the typer app, so a numeric option added later without a range
fails here."""

from __future__ import annotations

import math
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from replaykit.cli import app
from replaykit.commands.shell import polish
from tests.cli_runner import cli


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if hasattr(command, "commands"):
        for name, sub in sorted(command.commands.items()):
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


def _numeric(param: Any) -> type | None:
    annotation = param.type_descriptor.annotation
    found = [t for t in (typing.get_args(annotation) or (annotation,)) if t in (int, float)]
    return found[0] if found and not getattr(param, "is_flag", False) else None


def numeric_options() -> list[tuple[tuple[str, ...], Any, type, list[str]]]:
    """(command path, option, its type, placeholder arguments the command needs)."""
    found = []
    for path, command in _commands(polish(typer.main.get_command(app))):
        arguments = [p for p in command.params if p.param_type_name == "argument" and p.required]
        needed = ["x"] * len(arguments)
        for param in command.params:
            kind = _numeric(param) if param.param_type_name == "option" else None
            if kind is not None:
                found.append((path, param, kind, needed))
    return found


OPTIONS = numeric_options()


def _id(item: tuple[tuple[str, ...], Any, type, list[str]]) -> str:
    return " ".join(item[0]) + " " + str(item[1].opts[0])


def test_the_enumeration_finds_the_options_of_the_issue() -> None:
    names = {_id(o) for o in OPTIONS}
    assert {"replay --workers", "certify --workers", "cassettes ls --limit", "view --poll"} <= names
    assert len(OPTIONS) > 30


@pytest.mark.parametrize("option", OPTIONS, ids=_id)
def test_every_numeric_option_declares_its_range(
    option: tuple[tuple[str, ...], Any, type, list[str]],
) -> None:
    _, param, kind, _ = option
    assert param.min is not None, f"{_id(option)} accepts any {kind.__name__}: give it min= (and max=)"
    if kind is float:  # a float option without a max would take inf
        assert param.max is not None and math.isfinite(param.max), f"{_id(option)}: give it a finite max="


def _below(param: Any, kind: type) -> list[str]:
    low = param.min - 1 if kind is int else param.min - max(abs(param.min), 1.0)
    values = [str(int(low)) if kind is int else repr(low), "abc"]
    if param.max is not None:
        values.append(str(param.max + 1))
    if kind is float:
        values += ["nan", "inf"]
    return values


@pytest.mark.parametrize("option", OPTIONS, ids=_id)
def test_an_out_of_range_value_is_one_line_and_exit_2(
    option: tuple[tuple[str, ...], Any, type, list[str]], tmp_path: Path
) -> None:
    path, param, kind, needed = option
    for value in _below(param, kind):
        proc = cli(*path, *needed, param.opts[0], value, cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (value, proc.returncode, proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("Error: ") and param.opts[0] in lines[0], lines
        assert not list(tmp_path.iterdir()), f"{_id(option)} {value} created {list(tmp_path.iterdir())}"


def test_replay_workers_minus_one_is_refused(tmp_path: Path) -> None:
    """The issue's own line."""
    proc = cli("replay", "RUN", "--workers", "-1", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert "--workers" in line and "(got -1)" in line and "greater than or equal to 1" in line, line
