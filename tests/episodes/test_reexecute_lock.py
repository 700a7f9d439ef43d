"""Re-executions of the same episode in several processes at once (two `certify` of one run,
another session's on the same quickstart keys) take turns on its workspace, as recording does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replaykit.testing import project_root, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e


def test_concurrent_certifies_of_one_run_all_succeed(tmp_path: Path) -> None:
    tasks = [str(project_root() / "envs" / t) for t in ("hello-file", "organize-files")]
    config = write_config(tmp_path, {"panel.tasks": tasks, "panel.seeds": [0, 1]})
    run = json.loads(cli("run", str(config), "--json").stdout)
    argv = [sys.executable, "-m", "replaykit.cli", "certify", run["run_id"], "--refresh", "--json"]
    argv += ["--config", str(config)]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert json.loads(out)["certified"] and json.loads(out)["deterministic"] == 2
