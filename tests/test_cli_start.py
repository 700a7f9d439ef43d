"""CLI start-up (issue 39 item 6): a command imports what it uses.

Listings (``cassettes ls``, ``runs``, ``cassettes show``) never load vcrpy, the recorder or the
rollout, nor pydantic where no value needs it; ``--help`` never loads typer's rich help; a
command line builds only the command it names; plain option values are converted without
pydantic, exactly as typer converts them. Timings are ``benchmarks/cli_start.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from replaykit.cli import app
from replaykit.commands.coercion import NOT_PLAIN, plain_value
from replaykit.commands.shell import only_command, polish
from replaykit.exchange.importer import import_bundle

pytestmark = pytest.mark.e2e  # fresh CLI processes

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "cassettes" / "quickstart-training.tar.gz"
#: what no listing may load: vcrpy (~0.5 s of CPU to import) and what records and rolls out
RECORDING = ("vcr", "replaykit.capture.recorder", "replaykit.episodes.rollout", "replaykit.episodes.certify")
#: what runs one command line in a fresh interpreter and prints the modules it imported
LOADED = (
    "import io, json, sys, contextlib\n"
    "from replaykit.cli import app\n"
    "from replaykit.commands.shell import run\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    code = run(app, sys.argv[1:])\n"
    "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
)


def loaded(*args: str) -> set[str]:
    """The modules ``replaykit ARGS`` imported, in a fresh interpreter (it must succeed)."""
    proc = subprocess.run(
        [sys.executable, "-c", LOADED, *args], capture_output=True, text=True, timeout=120, env=os.environ
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, (args, proc.stderr)
    return set(result["modules"])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped quickstart training: runs, a training, verdicts and their cassettes."""
    from replaykit.cassette.store import Store

    path = tmp_path_factory.mktemp("start") / "store"
    import_bundle(Store(path), BUNDLE)
    return path


def _listings(store: Path) -> list[tuple[str, ...]]:
    from replaykit.cassette.store import Store

    first = Store(store, readonly=True).cassette_summaries(1)[0]["id"]
    return [
        ("cassettes", "ls", "--store", str(store)),
        ("runs", "--store", str(store)),
        ("runs", "--kind", "measure", "--store", str(store)),
        ("cassettes", "show", str(first), "--store", str(store)),
    ]


def test_listings_never_load_the_recorder(store: Path) -> None:
    for args in _listings(store):
        modules = loaded(*args)
        assert not [m for m in RECORDING if m in modules], args


#: what a listing of plain rows into a pipe never loads: pydantic (a run is read by
#: ``core/run_rows.py``, a certificate's model only for a certificate found), git and yaml (no
#: config), rich's console and ``Text`` (plain tables are laid out from their strings), the event
#: classes and their codec (index rows and documents as JSON: no episode decoded)
HEAVY = {
    "pydantic",
    "git",
    "yaml",
    "rich.console",
    "rich.text",
    "replaykit.cassette.events",
    "replaykit.cassette.codec",
    "replaykit.core.run_doc",
}


def test_a_listing_of_runs_loads_neither_pydantic_nor_git(store: Path) -> None:
    """Without a training to verify, ``runs`` and ``cassettes ls`` need no config model and no
    document model; piped, their lines and tables are plain text."""
    assert not HEAVY & loaded("cassettes", "ls", "--store", str(store))
    assert not HEAVY & loaded("runs", "--kind", "measure", "--store", str(store))


def test_help_is_plain_and_light() -> None:
    modules = loaded("--help")
    assert "typer.rich_utils" not in modules and "rich" not in modules and "pydantic" not in modules
    light = (
        "replaykit.cli",
        "replaykit.commands",
        "replaykit.core",
        "replaykit.render",
    )  # render: its facade
    assert not [m for m in modules if m.startswith("replaykit.") and not m.startswith(light)]
    assert not [m for m in modules if m.startswith("replaykit.render.")]  # no renderer


def test_only_the_named_command_is_built() -> None:
    pruned = only_command(app, ["cassettes", "ls", "--store", "x"])
    assert pruned is not None
    command = typer.main.get_command(pruned)
    assert list(command.commands) == ["cassettes"]  # type: ignore[attr-defined]
    assert list(command.commands["cassettes"].commands) == ["ls"]  # type: ignore[attr-defined]
    listed = only_command(app, ["--help"])  # the root's help lists names and first lines only
    assert listed is not None
    command = typer.main.get_command(listed)
    every = typer.main.get_command(app)
    assert list(command.commands) == list(every.commands)  # type: ignore[attr-defined]
    assert not command.commands["run"].params  # type: ignore[attr-defined]  # no parameter built
    for args in (["cassettes"], ["--version"], ["cassettes", "nope"], ["nope"], []):
        assert only_command(app, args) is None, args  # the whole app: its help, its suggestions


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("-h",),
        ("cassettes", "ls", "--help"),
        ("runs", "-h"),
        ("run", "--help"),
        ("cassettes", "ls", "--limit", "x"),
        ("runs", "--kind", "nope"),
        ("engine", "start", "--engine", "other"),
    ],
)
def test_a_pruned_app_says_the_same(args: tuple[str, ...], tmp_path: Path) -> None:
    """Help, usage errors and their hint are the same words whether the whole app was built."""
    from tests.cli_runner import cli

    pruned = cli(*args, cwd=tmp_path, env={"COLUMNS": "80"})
    whole = subprocess.run(
        [sys.executable, "-c", _WHOLE, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "80"},
        timeout=120,
    )
    assert (pruned.returncode, pruned.stdout, pruned.stderr) == (whole.returncode, whole.stdout, whole.stderr)


#: the CLI with ``only_command`` disabled: every command built, as before
_WHOLE = (
    "import sys\n"
    "from replaykit.commands import shell\n"
    "shell.only_command = lambda app, args: None\n"
    "from replaykit.cli import app\n"
    "sys.exit(shell.run(app, sys.argv[1:]))\n"
)

#: values a command line (or a default) hands a parameter: each must convert as typer does
SAMPLES: list[Any] = [
    "",
    "abc",
    "12",
    "007",
    "-3",
    "1.5",
    "nan",
    " 4",
    "4 ",
    "once",
    "ONCE",
    "measure",
    "x" * 20,
    3,
    2.5,
    None,
]


def _typer_converts(param: Any, value: Any, ctx: Any) -> tuple[str, Any]:
    from typer._coercion import build_runtime_param

    try:
        return "ok", build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)
    except Exception as exc:  # the refusal's words
        return "error", str(exc)


def test_plain_conversion_is_typers() -> None:
    """Every parameter of every command: where the plain path converts a value, typer's
    pydantic conversion gives the same value (of the same type); where typer refuses it, the
    plain path leaves it to typer."""
    command = polish(typer.main.get_command(app))
    checked = 0

    def walk(cmd: Any) -> None:
        nonlocal checked
        ctx = cmd.make_context(cmd.name or "replaykit", [], resilient_parsing=True)
        for param in getattr(cmd, "params", []):
            if getattr(param, "type_descriptor", None) is None or param.multiple or param.nargs == -1:
                continue
            for value in SAMPLES:
                if value is None:
                    continue
                plain = plain_value(param, value, ctx)
                if plain is NOT_PLAIN:
                    continue
                checked += 1
                assert _typer_converts(param, value, ctx) == ("ok", plain), (cmd.name, param.name, value)
                assert type(plain) is type(_typer_converts(param, value, ctx)[1])
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(command)
    assert checked > 100
