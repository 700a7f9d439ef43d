"""The one way tests drive the real CLI: ``python -m replaykit.cli`` in a subprocess,
output captured as text, the caller's environment plus ``env``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    check: bool = False,
    timeout: float = 600,
    **kw: Any,
) -> subprocess.CompletedProcess[str]:
    """Run ``replaykit ARGS``; ``check``: a non-zero exit fails with its stdout and stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "replaykit.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        **kw,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"replaykit {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc
