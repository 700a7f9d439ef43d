"""scripts/test.sh says how long each step took (scripts/steps.sh): as each step ends, and the
last one with the total when the script exits, its exit code kept."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]


def test_each_step_says_how_long_it_took_and_the_exit_code_is_kept() -> None:
    script = "set -euo pipefail; source scripts/steps.sh; step 'pip install'; sleep 1; step pytest; exit 3"
    proc = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    lines = proc.stdout.splitlines()
    assert len(lines) == 4 and lines[0] == "== pip install (at 0 s)", lines
    assert re.fullmatch(r"== pip install: took [12] s", lines[1]) and lines[2].startswith("== pytest (at ")
    assert re.fullmatch(r"== pytest: took 0 s \(total [12] s\)", lines[3]), lines
    assert "source scripts/steps.sh" in (REPO / "scripts" / "test.sh").read_text()
