"""A full disk (a small tmpfs): a write fails with one line naming the path and the free
space, ``cassettes rm`` and ``gc`` still run (the store's reserve is given back first,
compaction waits for room), and nothing is corrupted."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        reason = f"cannot mount a tmpfs (root needed): {proc.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Write a filler file until the disk has no byte left."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.sync()


def run_json(*args: str, cwd: Path) -> Any:
    proc = cli(*args, "--json", cwd=cwd)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, (args, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


@pytest.mark.e2e
def test_a_full_disk_is_one_line_and_rm_and_gc_still_work(small_disk: Path, tmp_path: Path) -> None:
    config = write_config(
        tmp_path, {"panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")], "panel.seeds": [0]}
    )
    data = yaml.safe_load(config.read_text())
    store = small_disk / "store"
    data["store"] = str(store)
    config.write_text(yaml.safe_dump(data))
    kept = run_json("run", str(config), cwd=tmp_path)
    doomed = run_json("run", str(config), "--model", "reference-strong", cwd=tmp_path)
    assert (store / "reserve.bin").is_file()

    fill(small_disk)
    data["panel"]["seeds"] = [1]  # a new episode: the run must write
    config.write_text(yaml.safe_dump(data))
    full = cli("run", str(config), cwd=tmp_path)
    assert full.returncode == 1 and "Traceback" not in full.stderr, full.stderr
    assert len(full.stderr.strip().splitlines()) == 1, full.stderr
    assert full.stderr.startswith(f"Error: disk full: {store / 'index.db'} cannot be written ("), full.stderr
    assert "free there" in full.stderr and "gc --store" in full.stderr

    report = cli(
        "report", kept["run_id"], "--store", str(store), "-o", str(small_disk / "r.html"), cwd=tmp_path
    )
    assert report.returncode == 1 and len(report.stderr.strip().splitlines()) == 1, report.stderr
    assert report.stderr.startswith("Error: disk full: ") and "free there" in report.stderr, report.stderr
    assert not (small_disk / "r.html").exists()

    removed = run_json("cassettes", "rm", doomed["run_id"], "-r", "--store", str(store), cwd=tmp_path)
    assert [r["id"] for r in removed["runs"]] == [doomed["run_id"]] and set(removed["cassettes"]) == set(
        doomed["cassettes"]
    )
    assert removed["compacted"] is False and "keeps its size" in removed["note"]  # no room to VACUUM yet
    assert run_json("gc", "--store", str(store), cwd=tmp_path)["blobs"] == 0

    (small_disk / "filler").unlink()
    report = run_json("cassettes", "verify", "--store", str(store), cwd=tmp_path)
    assert report["ok"] is True, report
    assert run_json("replay", kept["run_id"], "--store", str(store), cwd=tmp_path)["identical"] is True
    gone = cli("replay", doomed["run_id"], "--store", str(store), cwd=tmp_path)
    assert gone.returncode == 1 and gone.stderr.startswith("Error: no "), gone.stderr


@pytest.mark.unit
def test_a_full_disk_outside_the_store_names_the_path_and_its_free_space(tmp_path: Path) -> None:
    from replaykit.commands.shell import _os_error_line

    line = _os_error_line(OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "r.html")))
    assert (
        line.startswith(f"Error: disk full: cannot write {tmp_path / 'r.html'} (") and " free there)" in line
    )
