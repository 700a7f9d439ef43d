"""A ``kill -9`` during ``cassettes import`` leaves its spool in ``$TMPDIR``; the next import (or
pull, or reproduce) removes what dead processes left, never a live neighbour's folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replaykit.core.stale import clean_dead_temp, owned_temp_dir
from replaykit.exchange.spool import TEMP_KINDS
from replaykit.testing import REPO_ROOT
from tests.cli_runner import cli

SHIPPED = REPO_ROOT / "cassettes" / "quickstart-training.tar.gz"


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_dead_owners_folders_of_the_kinds_named_are_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read $TMPDIR again
    mine = owned_temp_dir("blobs")
    assert mine.parent == tmp_path and mine.name.startswith(f"replaykit-blobs-{os.getpid()}-")
    dead = dead_pid()
    gone = [tmp_path / f"replaykit-{kind}-{dead}-x1y2z3ab" for kind in ("blobs", "pull")]
    kept = [
        tmp_path / f"replaykit-wt-{dead}-x1y2z3ab",  # another kind: a worktree, swept by its own code
        tmp_path / "replaykit-blobs-k2j3h4x9",  # no pid in its name: nobody's to remove
        tmp_path / f"replaykit-blobs-{dead}.txt",
    ]
    for folder in gone + kept:
        folder.mkdir()
    removed = clean_dead_temp(TEMP_KINDS)
    assert sorted(removed) == sorted(gone)
    assert mine.is_dir() and all(k.is_dir() for k in kept)


@pytest.mark.e2e
def test_a_killed_import_leaves_its_spool_and_the_next_import_removes_it(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    left: list[Path] = []
    for _ in range(5):  # an import fast enough to finish before it is caught is tried again
        store = tmp_path / f"store-{len(left)}"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "replaykit.cli",
                "cassettes",
                "import",
                str(SHIPPED),
                "--store",
                str(store),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if list(tmpdir.glob(f"replaykit-*-{proc.pid}-*")):
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
        proc.wait(timeout=60)
        left = list(tmpdir.glob(f"replaykit-*-{proc.pid}-*"))
        if proc.returncode == -signal.SIGKILL and left:
            break
    assert left, "no import was caught with its spool in $TMPDIR"
    again = cli(
        "cassettes",
        "import",
        str(SHIPPED),
        "--store",
        str(tmp_path / "again"),
        env={"TMPDIR": str(tmpdir)},
        process=True,
    )
    assert again.returncode == 0, again.stderr
    assert not [p for p in left if p.exists()], sorted(tmpdir.iterdir())
    assert not list(tmpdir.glob("replaykit-*")), sorted(tmpdir.iterdir())  # and its own are gone too
