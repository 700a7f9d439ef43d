"""The real llama-server does not outlive ``replaykit engine start`` (issue 38 item 7): kill -9 of
the command stops it (the kernel's parent-death signal), and a start on the port it held then
succeeds. The stand-in version of this test is tests/models/test_engine_lifetime.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replaykit.core.procs import command_line
from replaykit.models.engines import free_port

pytestmark = pytest.mark.engine  # real llama.cpp engines (tests/engine/conftest.py)


def test_kill_9_of_engine_start_stops_llama_server(tiny_model: Path, tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "replaykit.cli", "engine", "start", "--model", str(tiny_model)]
    argv += ["--port", str(port), "--json", "--log", str(tmp_path / "engine.log")]
    cli = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert cli.stdout is not None
    text = ""
    while not text.rstrip().endswith("}"):
        line = cli.stdout.readline()
        assert line, cli.stderr.read() if cli.stderr else ""
        text += line
    engine = int(json.loads(text)["pid"])
    assert "llama-server" in (command_line(engine) or "")
    cli.send_signal(signal.SIGKILL)
    cli.wait()
    for _ in range(100):
        if command_line(engine) is None:
            break
        time.sleep(0.1)
    else:
        os.kill(engine, signal.SIGKILL)
        raise AssertionError(f"llama-server (pid {engine}) outlived engine start's kill -9")
