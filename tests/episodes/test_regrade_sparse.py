"""``regrade --tests DIR`` with a large sparse file in DIR: hashed in chunks and copied with its
holes, so the command's peak memory and what it writes do not grow with the file's size
(issue 38 item 4: a 3 GiB sparse file peaked at 6.37 GB RSS and wrote 3.1 GB to TMPDIR).

Each regrade runs in its own process under a wrapper that reads its peak RSS and blocks written
(``getrusage(RUSAGE_CHILDREN)``): a folder with a 1 GiB sparse file against one with a 1 MB file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import project_root, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

MEASURE = """
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": proc.returncode, "out": proc.stdout, "err": proc.stderr,
                  "rss_kb": usage.ru_maxrss, "written_kb": usage.ru_oublock // 2}))
"""


def regrade(run_id: str, config: Path, tests: Path, tmpdir: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "replaykit.cli", "regrade", run_id, "--tests", f"hello-file={tests}"]
    argv += ["--config", str(config), "--json"]
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    done = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, env=env)
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["rc"] == 0, report["err"]
    return report


def make_tests(root: Path, name: str, big: int, sparse: bool) -> Path:
    folder = root / name
    shutil.copytree(project_root() / "envs" / "hello-file" / "tests", folder)
    with open(folder / "data.bin", "wb") as fh:
        if sparse:
            fh.write(b"head")
            fh.truncate(big)
        else:
            fh.write(os.urandom(big))
    return folder


def test_regrade_tests_with_a_sparse_file_stays_small(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, {"panel.tasks": [str(project_root() / "envs" / "hello-file")], "panel.seeds": [0]}
    )
    run = json.loads(cli("run", str(config), "--json", check=True).stdout)
    small = make_tests(tmp_path, "small", 1 << 20, sparse=False)
    sparse = make_tests(tmp_path, "sparse", 1 << 30, sparse=True)
    assert os.stat(sparse / "data.bin").st_blocks * 512 < 1 << 20  # it is sparse
    (tmp_path / "t1").mkdir()
    (tmp_path / "t2").mkdir()
    base = regrade(run["run_id"], config, small, tmp_path / "t1")
    big = regrade(run["run_id"], config, sparse, tmp_path / "t2")
    regraded = [json.loads(r["out"])["episodes"][0]["passed"] for r in (base, big)]
    assert regraded == [run["episodes"][0]["passed"]] * 2  # the same tests, the same grade
    print(f"peak RSS {big['rss_kb']} kB (1 MB folder: {base['rss_kb']} kB); written {big['written_kb']} kB")
    assert big["rss_kb"] <= 1.3 * base["rss_kb"], (big["rss_kb"], base["rss_kb"])
    assert big["written_kb"] - base["written_kb"] < 64 * 1024, (big["written_kb"], base["written_kb"])
    left = [p for p in (tmp_path / "t2").rglob("*") if p.is_file() and p.stat().st_size > 1 << 20]
    assert not left  # its scratch copies are gone
