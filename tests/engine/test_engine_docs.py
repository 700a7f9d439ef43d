"""docs/endpoints.md's "A real engine in five minutes" runs as written (on a free port)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replaykit.models.engines import free_port
from replaykit.testing import REPO_ROOT

pytestmark = pytest.mark.engine  # a real llama.cpp server (tests/engine/conftest.py)


def five_minutes_block() -> str:
    text = (REPO_ROOT / "docs" / "endpoints.md").read_text()
    section = text.split("## A real engine in five minutes", 1)[1]
    found = re.search(r"```bash\n(.*?)```", section, re.S)
    assert found, "docs/endpoints.md: the five-minutes section has no bash block"
    return found.group(1)


def test_the_five_minutes_section_runs_as_written(tmp_path: Path) -> None:
    for folder in ("configs", "envs", "scripts"):
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder)
    port = str(free_port())
    config = tmp_path / "configs" / "quickstart-llama.yaml"
    config.write_text(config.read_text().replace("8080", port))
    block = five_minutes_block()
    assert "kill %1" in block and "replaykit replay" in block
    script = "\n".join(
        [
            "set -euo pipefail",
            "trap 'kill $(jobs -p) 2> /dev/null || true' EXIT",
            block.replace("8080", port),
        ]
    )
    env = {k: v for k, v in os.environ.items() if k != "REPLAYKIT_STORE"}
    # this venv's python and replaykit as the block names them: real programs, so `kill %1` stops
    # the engine itself (a shell function run as a job is a subshell: killing it left the server)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    time.sleep(1)  # the block's `kill %1` has been sent: the engine is gone, nothing serves its port
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", int(port))) != 0, (
            f"the engine outlived the block: port {port} answers"
        )
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["recorded_count"] == 16 and sum(e["steps"] for e in run["episodes"]) >= 1
    assert "identical" in proc.stdout and "seed not honoured" in proc.stdout


def test_engine_overhead_benchmark_runs_small() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "benchmarks" / "engine_overhead.py"),
            "--episodes",
            "2",
            "--calls",
            "2",
            "--engine",
            "llama-cpp-python",
            "--model",
            "tiny",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "engine's own time per call" in proc.stdout and "overhead / engine time" in proc.stdout
