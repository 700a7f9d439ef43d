"""Terminal-Bench 1 task folders (``task.yaml``, ``run-tests.sh``, ``docker-compose.yaml``).

replaykit reads the Harbor layout. A TB1 folder is recognised, never mistaken for "no
task": loading it is one line naming the format and Harbor's own converter,
``harbor tasks migrate -i SRC -o OUT`` (it maps ``task.yaml`` to task.toml and
instruction.md, ``solution.sh`` to solution/solve.sh, ``run-tests.sh`` to
tests/test.sh with a reward line, and the compose main service into the Dockerfile).
"""

from __future__ import annotations

from pathlib import Path

MARKERS: tuple[str, ...] = ("task.yaml", "run-tests.sh")


def is_tb1(folder: Path) -> bool:
    """A Terminal-Bench 1 task folder: ``task.yaml`` and no ``task.toml``."""
    return (folder / "task.yaml").is_file() and not (folder / "task.toml").exists()


def problem(folder: Path) -> str:
    """The one line a TB1 folder loads as (see the module docstring)."""
    have = ", ".join(m for m in (*MARKERS, "docker-compose.yaml") if (folder / m).is_file())
    return (
        f"{folder}: a Terminal-Bench 1 task ({have}), not the Harbor layout replaykit reads; "
        f"convert it with `harbor tasks migrate -i {folder} -o OUT` and check OUT/{folder.name}"
    )
