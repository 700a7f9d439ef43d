"""Smoke test: the audit benchmark runs end to end at a tiny size (its figures are not checked here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "audit.py"


def test_audit_benchmark_runs_small(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--epochs", "2", "--tasks", "2", "--cache", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "recorded audit reproduces=True" in proc.stdout and "sweep cells 6" in proc.stdout
