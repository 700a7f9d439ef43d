"""Run the typer app the way click users expect: one-line errors and conventional help.

typer (0.29) vendors its own click under ``typer._click``, so its exceptions are not
``click``'s: everything here refers to ``typer._click`` on purpose.

- usage errors: ``Error: <what>. Try 'replaykit run --help' for help.`` on one line, exit 2
- library errors (``ReplaykitError``) and OS errors: ``Error: <what>`` on one line, exit 1
- Ctrl-C: ``interrupted — rerun the same command to resume`` (run, train, compare: their
  rerun takes up where they stopped), else ``interrupted``; exit 130
- a closed pipe (``replaykit runs | head``): silent, exit 1
- help: click-style metavars (``TEXT``, ``PATH``, ``[a|b]``), no ``<bool>``; arguments
  show as ``CONFIG`` rather than ``{config}``
- start-up: only the command named is built (``only_command``), and plain values are
  converted without pydantic (``commands/coercion.py``)
"""

from __future__ import annotations

import copy
import errno
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import typer
from typer import _click
from typer._coercion import RuntimeParam
from typer.core import TyperArgument, TyperOption
from typer.models import CommandInfo

from replaykit.commands.coercion import plain_runtime
from replaykit.core.errors import ANOTHER_STORE, CassetteNotFound, ReplaykitError, StoreCorrupt, StoreError

INTERRUPTED = "interrupted — rerun the same command to resume"
#: the commands whose rerun takes up where Ctrl-C stopped them (what they stored is reused);
#: any other says only that it was interrupted (a rerun of regrade, certify, … starts over)
RESUMES = frozenset({"run", "train", "compare"})


def interrupted_line(args: Sequence[str]) -> str:
    """What Ctrl-C prints for the command line ``args`` (without the program name)."""
    command = next((a for a in args if not a.startswith("-")), "")
    return INTERRUPTED if command in RESUMES else "interrupted"


_TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "Path": "PATH", "bool": "BOOLEAN"}


def _type_label(param: Any, ctx: Any) -> str:
    desc = param.type_descriptor
    if desc.is_choice and desc.choices is not None:
        return "[" + "|".join(str(c) for c in desc.choices) + "]"
    annotation = desc.annotation
    args = getattr(annotation, "__args__", None)
    if desc.is_list and args:
        annotation = args[0]
    name = getattr(annotation, "__name__", str(annotation))
    return _TYPE_NAMES.get(name, name.upper())


class _Option(TyperOption):
    def get_runtime_param(self) -> RuntimeParam:
        if self._runtime_param is None:
            self._runtime_param = plain_runtime(self)
        return self._runtime_param

    def display_type(self, ctx: Any) -> str:
        if self.is_flag:
            return ""
        return _type_label(self, ctx)


class _Argument(TyperArgument):
    def get_runtime_param(self) -> RuntimeParam:
        if self._runtime_param is None:
            self._runtime_param = plain_runtime(self)
        return self._runtime_param

    def display_type(self, ctx: Any) -> str:
        return ""

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")


def polish(command: Any) -> Any:
    """Give every parameter of ``command`` (recursively) click-style help display."""
    for param in getattr(command, "params", []):
        if type(param) is TyperOption:
            param.__class__ = _Option
        elif type(param) is TyperArgument:
            param.__class__ = _Argument
            if param.metavar is None and param.name:
                param.metavar = param.name.upper()
    original = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = original(ctx)
        if type(option) is TyperOption:
            option.__class__ = _Option
        return option

    command.get_help_option = get_help_option
    if hasattr(command, "commands"):
        command.no_args_is_help = False  # click's "Missing command." usage error instead of a help dump
        for sub in command.commands.values():
            polish(sub)
    return command


def _hint(ctx: Any) -> str:
    if ctx is None:
        return ""
    return f" Try '{ctx.command_path} --help' for help."


def _given(exc: Any) -> str:
    """`` (got VALUE)`` for a value typer's pydantic coercion refused (its message names only the rule)."""
    errors = getattr(exc.__cause__, "errors", None)
    try:
        value = errors()[0]["input"] if callable(errors) else None
    except (IndexError, KeyError, TypeError):
        return ""
    return f" (got {value})" if isinstance(value, str) and len(value) <= 40 else ""


def _usage_line(exc: Any) -> str:
    ctx = exc.ctx
    message = " ".join(exc.format_message().split()).rstrip(".") + _given(exc)
    names = sorted(getattr(ctx.command, "commands", {}) or {}) if ctx is not None else []
    if message.startswith("Missing command") and names:
        message = f"Missing command (one of: {', '.join(names)})"
    message = message.rstrip(".")
    end = "" if message.endswith(("?", "!")) else "."  # "Did you mean 'run'?" takes no full stop after it
    return f"Error: {message}{end}{_hint(ctx)}"


def _os_error_line(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return f"Error: address already in use ({exc.strerror}); choose another --port"
    if exc.errno == errno.ENOSPC:  # a full disk: name the path and what is free there
        from replaykit.cassette.store.guard import free_bytes, human

        path = Path(str(exc.filename)) if exc.filename else Path.cwd()
        return (
            f"Error: disk full: cannot write {path} ({human(free_bytes(path))} free there)"
            " — free space (`replaykit gc` works on a full disk) or choose another path"
        )
    where = f": {exc.filename}" if exc.filename else ""
    return f"Error: {exc.strerror or exc}{where}"


def _quiet_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the interpreter's final flush is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def err(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _invoked(command: Any, args: Sequence[str]) -> Any:
    """The (sub)command ``args`` invoke (the group itself when none)."""
    for word in args:
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            if not word.startswith("-"):
                break
            continue
        command = sub
    return command


def _store_choices(command: Any) -> str:
    """How this command is pointed at another store: only the options it has."""
    if any("--store" in getattr(p, "opts", ()) for p in getattr(command, "params", ())):
        return "--store, --config CFG or $REPLAYKIT_STORE"
    return "the config's store: field"


def _message(exc: ReplaykitError, command: Any) -> str:
    """The error's one line, its store advice naming only options ``command`` has."""
    text = " ".join(str(exc).split())
    if text.endswith(ANOTHER_STORE):
        text += f" ({_store_choices(command)})"
    return text + _where(exc, command)


def _where(exc: ReplaykitError, command: Any = None) -> str:
    """For an id or store that was not found: which stores were looked in."""
    from replaykit.commands.options import looked_in

    missing = isinstance(exc, CassetteNotFound) or (
        isinstance(exc, StoreError) and not isinstance(exc, StoreCorrupt) and str(exc).startswith("no ")
    )
    said = str(exc)
    if " is a " in said:  # the id is there, as another kind: nothing to look elsewhere for
        return ""
    # where it looked; how to look elsewhere unless the message says so already (said once)
    where = looked_in(None if "--store" in said else _store_choices(command)) if missing else ""
    return f" ({where})" if where else ""


def only_command(app: typer.Typer, args: Sequence[str], top: bool = True) -> typer.Typer | None:
    """A copy of ``app`` holding only the command ``args`` name (``cassettes ls …``: the
    ``cassettes`` group with ``ls`` alone), or None when they name no command (an option first,
    a group alone, an unknown name: those need the whole app, its help and its suggestions).

    Building the click command of every registered command (their parameters, their help)
    costs more than most commands' own start-up; a command's usage, help and errors name the
    same path either way."""
    if top and list(args) in (["--help"], ["-h"]):
        return _listed_only(app)
    name = next(iter(args), "")
    for info in app.registered_commands:
        if info.name == name:
            if top and not (app.registered_callback or app.info.callback):
                return None  # typer would make a lone command of it, not a group naming it
                # (a sub-app is a group whatever it holds)
            pruned = copy.copy(app)
            pruned.registered_commands, pruned.registered_groups = [info], []
            return pruned
    for group in app.registered_groups:
        sub = group.typer_instance
        if group.name == name and sub is not None:
            inner = only_command(sub, args[1:], top=False)
            if inner is None:
                return None
            kept = copy.copy(group)
            kept.typer_instance = inner
            pruned = copy.copy(app)
            pruned.registered_commands, pruned.registered_groups = [], [kept]
            return pruned
    return None


def _listed_only(app: typer.Typer) -> typer.Typer:
    """A copy of ``app`` for its own ``--help``, which lists each command by name and first
    line: every command's callback is a stand-in with its docstring and no parameters (the
    root's own callback, its ``--version``, is kept), so no command's parameters are built."""

    def stand_in(info: CommandInfo) -> CommandInfo:
        def command() -> None:
            raise AssertionError("a stand-in for --help is never run")

        command.__doc__ = info.callback.__doc__ if info.callback else None
        kept = copy.copy(info)
        kept.callback = command
        return kept

    pruned = copy.copy(app)
    pruned.registered_commands = [stand_in(info) for info in app.registered_commands]
    pruned.registered_groups = []
    for group in app.registered_groups:
        kept = copy.copy(group)
        if group.typer_instance is not None:
            kept.typer_instance = _listed_only(group.typer_instance)
        pruned.registered_groups.append(kept)
    return pruned


def run(app: typer.Typer, args: Sequence[str] | None = None, prog_name: str = "replaykit") -> int:
    """Run ``app`` and return the exit code; never lets a traceback out for user errors."""
    from replaykit.commands.options import forget_stores

    forget_stores()  # each invocation says where it looked (tests run several in one process)
    argv = list(sys.argv[1:] if args is None else args)
    command = polish(typer.main.get_command(only_command(app, argv) or app))
    try:
        # click's ``main`` minus its own error handling (which turns Ctrl-C into a silent 130)
        command._main_shell_completion({}, prog_name, None)
        try:
            with command.make_context(prog_name, argv) as ctx:
                command.invoke(ctx)
            sys.stdout.flush()
        except typer.Exit as exc:
            sys.stdout.flush()
            return exc.exit_code
        return 0
    except ReplaykitError as exc:
        err(f"Error: {_message(exc, _invoked(command, list(sys.argv[1:] if args is None else args)))}")
        return 1
    except _click.exceptions.UsageError as exc:
        err(_usage_line(exc))
        return exc.exit_code
    except _click.exceptions.ClickException as exc:
        err(f"Error: {' '.join(exc.format_message().split())}")
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        err(interrupted_line(argv))
        return 130
    except BrokenPipeError:
        _quiet_stdout()
        return 1
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            _quiet_stdout()
            return 1
        err(_os_error_line(exc))
        return 1
