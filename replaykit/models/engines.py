"""Real engines on loopback with deterministic settings: ``replaykit engine start``.

Two engines serve a GGUF file (``models.model_files``):

- ``llama-server``, llama.cpp's own server, built from the llama.cpp vendored in the
  llama-cpp-python sdist (``scripts/setup-llama-server.sh``, cached under
  ``~/.cache/replaykit/llama.cpp/``, beside the libraries llama-cpp-python loads). Started with ``--jinja`` (tools and tool results go
  through the model's own chat template), one slot, no prompt cache, a fixed seed.
- ``llama-cpp-python``'s server (``python -m llama_cpp.server``), whose
  ``chatml-function-calling`` format leaves tool results out of the prompt: a model
  served that way never sees what its commands did (docs/endpoints.md).

``EngineProcess(spec).start()`` runs one in its own process group, waits until it
answers, and ``stop()`` ends the group; started from the main thread, the engine is also sent
SIGTERM by the kernel when this process dies, ``kill -9`` included (``core/procs.py``). ``serve``
notes it in a pidfile per port (``pidfile``), so the next start on that port names the process
that holds it and ``--stop-previous`` stops it. A missing engine, a busy port and an engine that
exits before it answers are one line each (``EngineError``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from replaykit.core.errors import ReplaykitError
from replaykit.core.files import write_atomic
from replaykit.core.procs import command_line, dies_with_parent, port_holders

LLAMA_CPP_PYTHON_VERSION = "0.3.36"  # scripts/setup-engine.sh and scripts/setup-llama-server.sh
ENGINES = ("llama-server", "llama-cpp-python")
SETUP = {
    "llama-server": "bash scripts/setup-llama-server.sh",
    "llama-cpp-python": "bash scripts/setup-engine.sh (or pip install 'replaykit[engine]')",
}
#: llama-cpp-python's chat format that takes tools (and hides tool results from the prompt)
FUNCTION_CALLING = "chatml-function-calling"


class EngineError(ReplaykitError):
    """An engine is missing, cannot listen, or exited before it answered."""


def llama_server_binary() -> Path | None:
    """The cached build (scripts/setup-llama-server.sh), else ``$REPLAYKIT_LLAMA_SERVER``, else
    a ``llama-server`` on PATH; None when there is none."""
    explicit = os.environ.get("REPLAYKIT_LLAMA_SERVER")
    if explicit:
        return Path(explicit)
    root = Path(os.environ.get("REPLAYKIT_CACHE") or Path.home() / ".cache" / "replaykit")
    cached = root / "llama.cpp" / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}" / "bin" / "llama-server"
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    found = shutil.which("llama-server")
    return Path(found) if found else None


def engine_missing(engine: str) -> str | None:
    """None when ``engine`` can run here, else one line naming the setup command."""
    if engine == "llama-server":
        binary = llama_server_binary()
        if binary is None or not (binary.is_file() and os.access(binary, os.X_OK)):
            return (
                f"llama-server is not built here; run {SETUP[engine]} (it compiles llama.cpp's server once)"
            )
        return None
    if engine == "llama-cpp-python":
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError as exc:
            return f"llama-cpp-python[server] is not installed ({exc}); run {SETUP[engine]}"
        return None
    raise EngineError(f"--engine {engine!r}: use one of {', '.join(ENGINES)}")


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_port(host: str, port: int) -> None:
    """One line when ``host:port`` is taken (the engine would fail to bind, later and less
    clearly), naming the process that holds it (an engine ``engine start`` left: its pidfile)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no owner
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise EngineError(
                    f"cannot listen on {host}:{port}: address already in use{held_by(host, port)}"
                ) from None
            raise EngineError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def pidfile(port: int) -> Path:
    """Where ``engine start`` on ``port`` notes the engine it runs (removed when it stops it)."""
    root = Path(os.environ.get("REPLAYKIT_CACHE") or Path.home() / ".cache" / "replaykit")
    return root / "engines" / f"port-{port}.pid"


def recorded_engine(port: int) -> tuple[int, str] | None:
    """(pid, command) of the engine a pidfile names on ``port`` when that process still runs that
    command (a pid reused by another program is not it)."""
    try:
        noted = json.loads(pidfile(port).read_text())
        pid, command = int(noted["pid"]), str(noted["command"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (pid, command) if command_line(pid) == command else None


def held_by(host: str, port: int) -> str:
    """What a busy port's line adds: who holds it, and what to do."""
    engine = recorded_engine(port)
    if engine is not None:
        return (
            f" by an engine `replaykit engine start` left running (pid {engine[0]}: {engine[1][:80]}); "
            f"stop it with --stop-previous, or choose another --port"
        )
    holders = port_holders(host, port)
    if holders:
        pid, command = holders[0]
        return f" by pid {pid} ({command[:80]}); stop it, or choose another --port"
    return "; choose another --port"


def stop_previous(host: str, port: int) -> str | None:
    """Stop the engine a pidfile names on ``port`` (only one replaykit started, still running its
    command): what was stopped, or None when there was none."""
    engine = recorded_engine(port)
    if engine is None:
        return None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(engine[0], signal.SIGTERM)
    deadline = time.monotonic() + 10
    while command_line(engine[0]) == engine[1] and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if command_line(engine[0]) == engine[1]:
            os.killpg(engine[0], signal.SIGKILL)
    pidfile(port).unlink(missing_ok=True)
    _await_free(host, port, time.monotonic() + 5)
    return f"stopped the engine left on {host}:{port} (pid {engine[0]})"


def _await_free(host: str, port: int, deadline: float) -> None:
    """Wait until ``host:port`` binds again: an ending process's command line empties (its
    memory goes) before its files, the listening socket among them, are closed."""
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
                return
            except OSError:
                pass
        time.sleep(0.05)


@dataclass
class EngineSpec:
    """What to serve and how. The settings that change answers are explicit: one slot, no
    prompt cache, a fixed seed; threads and batch sizes do not change answers on the CPU."""

    model_path: Path
    alias: str
    engine: str = "llama-server"
    port: int = 0  # 0: a free one
    host: str = "127.0.0.1"
    n_ctx: int = 4096
    threads: int = 1
    seed: int = 0
    chat_format: str = FUNCTION_CALLING  # llama-cpp-python only
    chat_template_file: Path | None = None  # llama-server only: instead of the GGUF's template
    extra_args: tuple[str, ...] = ()
    log_path: Path | None = None

    def command(self) -> list[str]:
        if self.engine == "llama-server":
            binary = llama_server_binary()
            if binary is None:
                raise EngineError(engine_missing("llama-server") or "llama-server is missing")
            cmd = [str(binary), "--model", str(self.model_path), "--alias", self.alias]
            cmd += ["--host", self.host, "--port", str(self.port), "--ctx-size", str(self.n_ctx)]
            cmd += ["--threads", str(self.threads), "--threads-batch", str(self.threads)]
            cmd += ["--jinja", "--parallel", "1", "--no-cache-prompt", "--cache-ram", "0"]
            cmd += ["--seed", str(self.seed), "--no-webui", "--no-cont-batching"]
            if self.chat_template_file is not None:
                cmd += ["--chat-template-file", str(self.chat_template_file)]
            return cmd + list(self.extra_args)
        if self.engine == "llama-cpp-python":
            cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path)]
            cmd += ["--model_alias", self.alias, "--host", self.host, "--port", str(self.port)]
            cmd += ["--n_ctx", str(self.n_ctx), "--n_threads", str(self.threads)]
            cmd += ["--n_threads_batch", str(self.threads), "--chat_format", self.chat_format]
            return cmd + list(self.extra_args)
        raise EngineError(f"--engine {self.engine!r}: use one of {', '.join(ENGINES)}")


@dataclass
class EngineProcess:
    """One engine process serving ``spec`` on loopback (a context manager)."""

    spec: EngineSpec
    start_timeout: float = 180.0
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def base_url(self) -> str:
        return f"http://{self.spec.host}:{self.spec.port}/v1"

    @property
    def log_path(self) -> Path:
        return self.spec.log_path or self.spec.model_path.with_suffix(f".{self.spec.engine}.log")

    def start(self) -> Self:
        reason = engine_missing(self.spec.engine)
        if reason:
            raise EngineError(reason)
        if self.spec.port == 0:
            self.spec.port = free_port()
        check_port(self.spec.host, self.spec.port)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}  # flags only
        main = threading.current_thread() is threading.main_thread()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.spec.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                # gone with this process, whatever kills it (kill -9 too); the kernel watches the
                # starting thread, so only the main thread's engines are tied to it
                preexec_fn=dies_with_parent() if main else None,
            )
        try:
            self._wait_ready()
        except BaseException:  # Ctrl-C while it loads included: never leave it running
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EngineError(self.exit_line())
            if self.answers():
                return
            time.sleep(0.2)
        raise EngineError(
            f"{self.spec.engine} did not answer on {self.base_url} within {self.start_timeout:.0f} s "
            f"(its log: {self.log_path})"
        )

    def answers(self) -> bool:
        """llama-server answers /health with 200 once its model is loaded (503 before)."""
        path = "/health" if self.spec.engine == "llama-server" else "/v1/models"
        try:
            with urllib.request.urlopen(f"http://{self.spec.host}:{self.spec.port}{path}", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def exit_line(self) -> str:
        """Why the engine is gone, in one line: its exit status and its log's last error."""
        code = self.proc.returncode if self.proc else None
        lines = [ln.strip() for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        hints = [ln for ln in lines if "error" in ln.lower() or "failed" in ln.lower()] or lines
        last = hints[-1][:200] if hints else "no output"
        if "address already in use" in " ".join(lines[-5:]).lower():
            return f"cannot listen on {self.spec.host}:{self.spec.port}: address already in use; choose another --port"
        return f"{self.spec.engine} exited with status {code}: {last} (its log: {self.log_path})"

    def note_pid(self) -> None:
        """Write the pidfile the next ``engine start`` on this port reads (``held_by``)."""
        assert self.proc is not None
        command = command_line(self.proc.pid)
        if command:
            noted = {"pid": self.proc.pid, "command": command, "started_by": os.getpid()}
            write_atomic(pidfile(self.spec.port), json.dumps(noted).encode())

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and recorded_engine(self.spec.port) == (proc.pid, command_line(proc.pid)):
            pidfile(self.spec.port).unlink(missing_ok=True)
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass

    def serve(self, on_ready: Callable[["EngineProcess"], None]) -> None:
        """Start, call ``on_ready``, and run until Ctrl-C (``KeyboardInterrupt`` propagates) or
        SIGTERM (a clean return); an engine that exits on its own is an ``EngineError``."""
        with _sigterm_returns() as stopped:
            self.start()
            try:
                self.note_pid()
                on_ready(self)
                while not stopped():
                    if self.proc is None or self.proc.poll() is not None:
                        raise EngineError(self.exit_line())
                    time.sleep(0.25)
            finally:
                self.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def _sigterm_returns() -> Iterator[Callable[[], bool]]:
    """While inside, SIGTERM sets a flag instead of killing the process (so the engine's process
    group is stopped too); yields the flag's reader."""
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        yield lambda: bool(seen)
    finally:
        signal.signal(signal.SIGTERM, previous)
