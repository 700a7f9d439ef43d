"""Smoke test: the benchmarks run end to end at a tiny size (their figures are not checked here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def bench(name: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(BENCH / name), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_client_overhead_runs_small() -> None:
    out = bench("client_overhead.py", "--sizes", "50", "--repeats", "1")
    assert "replay overhead" in out and "\n     50 " in out


def test_training_replay_runs_small(tmp_path: Path) -> None:
    out = bench("training_replay.py", "--epochs", "1", "--tasks", "2", "--workers", "0", "--cache", str(tmp_path / "cache"))
    assert "identical=True" in out and "1 real candidates" in out


def test_verify_on_read_runs_small() -> None:
    out = bench("verify_on_read.py", "--repeats", "1")
    assert "verification costs" in out and "of offline replay time" in out
