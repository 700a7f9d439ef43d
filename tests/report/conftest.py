"""The quickstart training (configs/quickstart.yaml, built-in model), trained once per session
through the real CLI, shared by the diff, report and browser tests."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import write_config
from tests.cli_runner import cli as run_cli

cli = functools.partial(run_cli, check=True)


@pytest.fixture(scope="session")
def quickstart_training(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("quickstart-training")
    config = write_config(tmp)
    summary = json.loads(cli("train", str(config), "--json").stdout)
    return {"tmp": tmp, "config": config, "store": tmp / "store", "summary": summary}


def episodes_by_unit(store: Path | str, run_id: str) -> dict[str, str]:
    """``task#seed`` → cassette id of a stored run."""
    from replaykit.cassette.store import Store

    run = Store(store).get_run(run_id)
    return {e.unit: e.cassette_id for e in run.episodes}
