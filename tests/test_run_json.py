"""``replaykit run --json`` is the library call (issue 39 item 5): what the CLI prints is
``measure(config, report=True).to_json()``, each row's outcome and call facets included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaykit.episodes.config import load_config
from replaykit.episodes.run import measure
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e


def test_run_json_is_the_measure_result_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_config(
        tmp_path, {"panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")], "panel.seeds": [0, 1]}
    )
    cli("run", str(config), "--json", cwd=tmp_path, check=True)  # recorded
    printed = json.loads(cli("run", str(config), "--json", cwd=tmp_path, check=True).stdout)  # reused
    monkeypatch.chdir(tmp_path)
    called = measure(load_config(config), report=True).to_json()
    assert json.loads(json.dumps(called, default=str)) == printed
    assert printed["reused_count"] == 2 and printed["store"] == load_config(config).store_location
    assert all(e["outcome"] and e["call_facets"] and e["reused"] for e in printed["episodes"])
