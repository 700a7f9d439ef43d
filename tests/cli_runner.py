"""The one way tests drive the real CLI.

By default in-process: ``replaykit.commands.shell.run`` (what ``replaykit`` runs,
one-line errors and exit codes included) with stdout/stderr captured, the caller's
environment plus ``env`` and ``cwd`` applied for the call and restored after it,
what the command registered with ``atexit`` run at its end and what it left
unreferenced collected (as at a process exit: a store's connection closes and
checkpoints), and the per-process client cache cleared. That costs no interpreter start-up and no
re-import. What existed before the first call (the imported modules, the collected tests:
~300,000 objects) is frozen out of the collector (``gc.freeze``), again whenever modules were
imported since, so that collection looks only at what later calls made: a full collection of the
whole heap costs ~0.25 s of CPU, about half of what an in-process call used to cost.

``process=True`` runs ``python -m replaykit.cli`` in a subprocess instead: for tests
where a real process is the point (signals, Ctrl-C, kill -9, a ``timeout``, a
server started and stopped around the call, variables read at import time).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    check: bool = False,
    timeout: float = 600,
    process: bool = False,
    **kw: Any,
) -> subprocess.CompletedProcess[str]:
    """Run ``replaykit ARGS``; ``check``: a non-zero exit fails with its stdout and stderr."""
    if process or set(kw) - {"input"}:
        proc = subprocess.run(
            [sys.executable, "-m", "replaykit.cli", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            **kw,
        )
    else:
        proc = _in_process(list(args), cwd, env, kw.get("input"))
    if check and proc.returncode != 0:
        raise AssertionError(
            f"replaykit {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


@contextlib.contextmanager
def _exit_hooks() -> Iterator[list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]]:
    """Collect what the command registers with ``atexit``; run it (last first) at the end."""
    hooks: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []
    real = atexit.register

    def register(fn: Callable[..., Any], *a: Any, **k: Any) -> Callable[..., Any]:
        hooks.append((fn, a, k))
        return fn

    atexit.register = register  # type: ignore[assignment]
    try:
        yield hooks
    finally:
        atexit.register = real
        for fn, a, k in reversed(hooks):
            with contextlib.suppress(Exception):
                fn(*a, **k)


_frozen_modules = 0


def _freeze_the_heap() -> None:
    """Move every live object into the collector's permanent generation (``gc.freeze``)
    when modules were imported since the last time: they live until exit anyway. Garbage
    a later command leaves is still collected; it is never frozen before its collection."""
    global _frozen_modules
    if len(sys.modules) != _frozen_modules:
        gc.collect()
        gc.freeze()
        _frozen_modules = len(sys.modules)


def _in_process(
    args: list[str], cwd: Path | None, env: dict[str, str] | None, stdin: str | None
) -> subprocess.CompletedProcess[str]:
    from replaykit.cli import app
    from replaykit.commands.shell import run
    from replaykit.models.clients import clear_clients

    _freeze_the_heap()
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.StringIO(stdin or "")
        with _exit_hooks(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = run(app, args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:  # what an uncaught error prints in a real process
                traceback.print_exc()
                code = 1
    finally:
        clear_clients()
        if "replaykit.render.console" in sys.modules:  # --wide lasts one command, as in a process
            sys.modules["replaykit.render.console"].set_wide(False)
        gc.collect()  # what the command left unreferenced (a store's connection) closes, as at exit
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["replaykit", *args], code, out.getvalue(), err.getvalue())
