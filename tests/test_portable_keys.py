"""Keys name what, never where: a panel recorded from one folder against an endpoint on one
port is reused, cassette for cassette, from another folder against the same server on another
port (0 model calls, the same run id), and replays from a third folder with no server."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from replaykit.models.reference.server import ReferenceServer
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # the real CLI against reference servers on loopback

REPO = Path(__file__).resolve().parent.parent


def checkout(root: Path, base_url: str, store: Path) -> Path:
    """A fresh clone's layout under ``root`` whose config calls ``base_url`` and writes ``store``."""
    for folder in ("configs", "envs"):
        shutil.copytree(REPO / folder, root / folder)
    data = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    data["store"] = str(store)
    data["model"].update(base_url=base_url, api_key_env="")
    data["panel"] = {"tasks": ["../envs/hello-file", "../envs/organize-files"], "seeds": [0]}
    path = root / "configs" / "portable.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_another_folder_and_port_reuses_every_cassette(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(ReferenceServer()) for _ in range(2)]
        assert servers[0].base_url != servers[1].base_url  # two ports
        runs = []
        for name, server in zip(("a", "b"), servers, strict=True):
            config = checkout(tmp_path / name, server.base_url, store)
            runs.append(json.loads(cli("run", str(config), "--json", cwd=tmp_path / name, check=True).stdout))
    first, second = runs
    assert first["recorded_count"] == 2 and first["model_calls"] > 0
    assert second["reused_count"] == 2 and second["recorded_count"] == 0 and second["model_calls"] == 0
    assert second["run_id"] == first["run_id"] and second["cassettes"] == first["cassettes"]
    assert first["model"]["endpoint"] == "http://localhost/v1"  # the service, never its port
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    replayed = cli("replay", first["run_id"], "--store", str(store), "--json", cwd=elsewhere, check=True)
    assert json.loads(replayed.stdout)["identical"]
