"""Start and stop a real llama.cpp server (``llama-cpp-python[server]``) on loopback.

``LlamaServer(model_path, n_ctx=2048)`` runs ``python -m llama_cpp.server --model …
--n_ctx … --n_threads 1 --chat_format chatml-function-calling`` on a free loopback
port, waits until ``/v1/models`` answers, and stops it (the whole process group) on
exit. Its log goes to ``log_path`` (default: beside the model). Used by replaykit's
engine tests and benchmark; usable in yours::

    with LlamaServer(write_tiny_model(tmp / "tiny.gguf")) as server:
        ...  # model.base_url: server.base_url, model.name: server.model
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

CHAT_FORMAT = "chatml-function-calling"


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def engine_missing() -> str | None:
    """None when llama-cpp-python's server can be imported, else a one-line reason."""
    try:
        import llama_cpp
        import llama_cpp.server  # noqa: F401
    except ImportError as exc:
        return f"llama-cpp-python[server] is not installed ({exc}); run scripts/setup-engine.sh"
    return None


class LlamaServer:
    """A llama.cpp server process serving one GGUF file on 127.0.0.1."""

    def __init__(
        self,
        model_path: str | Path,
        n_ctx: int = 2048,
        chat_format: str = CHAT_FORMAT,
        extra_args: tuple[str, ...] = (),
        log_path: str | Path | None = None,
        port: int | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.extra_args = extra_args
        self.log_path = Path(log_path) if log_path else self.model_path.with_suffix(f".{n_ctx}.log")
        self.port = port or free_port()
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        """The model name requests send (the file name; llama-cpp-python serves its one model
        under any name and lists it by the path it was started with)."""
        return self.model_path.name

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            "1",
            "--n_threads_batch",
            "1",
            "--chat_format",
            self.chat_format,
            *self.extra_args,
        ]

    def start(self) -> "LlamaServer":
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace").strip().splitlines()[-1:]
                raise RuntimeError(f"llama.cpp server exited with {self.proc.returncode}: {' '.join(tail)}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2):
                    return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"llama.cpp server did not answer within {self.start_timeout:.0f} s (log: {self.log_path})"
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
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

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
