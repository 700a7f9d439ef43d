"""An engine does not outlive ``replaykit engine start`` (issue 38 item 7): kill -9 of the command
stops the engine (the kernel's parent-death signal), and the next start on a port an engine
still holds names that process and, with ``--stop-previous``, stops it. A stand-in
``llama-server`` (a Python script answering ``/health``) plays the engine: the real one's build
is the engine tier's."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from replaykit.core.procs import command_line

pytestmark = pytest.mark.e2e

STAND_IN = """#!{python}
import http.server, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"{{}}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.fixture()
def engine_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    binary = tmp_path / "llama-server"
    binary.write_text(STAND_IN.format(python=sys.executable))
    binary.chmod(0o755)
    (tmp_path / "model.gguf").write_bytes(b"GGUF" + b"\0" * 64)
    yield {**os.environ, "REPLAYKIT_LLAMA_SERVER": str(binary), "REPLAYKIT_CACHE": str(tmp_path / "cache")}
    for pid in STARTED:  # whatever a failing test left: this test's stand-ins and commands only
        if (command_line(pid) or "").find(str(tmp_path)) >= 0:
            os.kill(pid, signal.SIGKILL)
    STARTED.clear()


STARTED: list[int] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    env: dict[str, str], model: Path, port: int, *more: str
) -> tuple[subprocess.Popen[str], dict[str, object]]:
    argv = [sys.executable, "-m", "replaykit.cli", "engine", "start", "--model", str(model)]
    proc = subprocess.Popen(
        [*argv, "--port", str(port), "--json", *more],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    STARTED.append(proc.pid)
    text = ""
    while True:  # the JSON document, printed once the engine answers
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        text += line
        if line.startswith("}"):
            info = json.loads(text)
            STARTED.append(int(info["pid"]))
            return proc, info


def gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if command_line(pid) is None:
            return True
        time.sleep(0.1)
    return False


def test_kill_9_of_engine_start_stops_the_engine(engine_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    cli, info = start(engine_env, tmp_path / "model.gguf", port)
    engine = int(str(info["pid"]))
    assert command_line(engine) is not None
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    assert gone(engine, 10), f"the engine (pid {engine}) outlived engine start"
    assert port_free(port, 10), f"port {port} is still held after the engine ended"


def port_free(port: int, within: float) -> bool:
    """The port binds again within ``within`` seconds: a dying process's /proc cmdline empties
    (its memory is released) before its files, the listening socket among them, are closed."""
    deadline = time.monotonic() + within
    while True:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no one's
            try:
                s.bind(("127.0.0.1", port))
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
        time.sleep(0.1)


def test_the_next_start_names_the_engine_holding_the_port_and_can_stop_it(
    engine_env: dict[str, str], tmp_path: Path
) -> None:
    port = free_port()
    first, info = start(engine_env, tmp_path / "model.gguf", port)
    engine = int(str(info["pid"]))
    try:
        argv = [
            sys.executable,
            "-m",
            "replaykit.cli",
            "engine",
            "start",
            "--model",
            str(tmp_path / "model.gguf"),
        ]
        busy = subprocess.run(
            [*argv, "--port", str(port)], env=engine_env, capture_output=True, text=True, timeout=60
        )
        (line,) = busy.stderr.strip().splitlines()
        assert busy.returncode == 1 and "address already in use by an engine" in line, line
        assert f"(pid {engine}:" in line and "--stop-previous" in line, line
        second, again = start(engine_env, tmp_path / "model.gguf", port, "--stop-previous")
        try:
            assert gone(engine, 10) and again["pid"] != engine
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
    finally:
        first.kill()
        first.wait()
    assert gone(int(str(again["pid"])), 10)
    assert not (tmp_path / "cache" / "engines" / f"port-{port}.pid").exists()  # a clean stop removes it
