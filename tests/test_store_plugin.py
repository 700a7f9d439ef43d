"""A store backend from another package (tests/store_plugin: ``dirstore:PATH``, a driver written
from scratch, JSON tables in a folder), installed the way pip leaves it and found through its
``replaykit.stores`` entry point: the CLI records, replays, verifies and moves bundles with it
like with the built-in backends, and the shipped bundle imports into it and replays identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from replaykit.testing import write_config

pytestmark = pytest.mark.e2e  # drives the CLI

PLUGIN = Path(__file__).parent / "store_plugin"
REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "cassettes" / "quickstart-training.tar.gz"


def install(site: Path) -> None:
    """The plugin's module plus a ``.dist-info`` whose entry points come from its pyproject.toml."""
    meta = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    site.mkdir(parents=True)
    (site / "replaykit_dirstore.py").write_text((PLUGIN / "replaykit_dirstore.py").read_text())
    dist = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n"
    )
    lines = [
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items())
        for group, entries in meta["entry-points"].items()
    ]
    (dist / "entry_points.txt").write_text("".join(lines))


def cli(*args: str, site: Path | None, cwd: Path) -> tuple[int, Any, str]:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [sys.executable, "-m", "replaykit.cli", *args, "--json"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        doc = None
    return proc.returncode, doc, proc.stderr


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store-plugin") / "site"
    install(path)
    return path


def test_a_plugin_store_records_replays_verifies_and_exchanges_bundles(site: Path, tmp_path: Path) -> None:
    store = f"dirstore:{tmp_path / 'dir'}"
    config = write_config(tmp_path, {"panel.seeds": [0], "store": store})
    code, plugins, err = cli("plugins", site=site, cwd=tmp_path)
    assert code == 0, err
    assert "dirstore" in json.dumps(plugins) and "replaykit-dirstore" in json.dumps(plugins)

    code, run, err = cli("run", str(config), site=site, cwd=tmp_path)
    assert code == 0, err
    assert (tmp_path / "dir" / "cassettes.json").is_file() and not (tmp_path / "dir" / "index.db").exists()
    code, replay, err = cli("replay", run["run_id"], "--store", store, site=site, cwd=tmp_path)
    assert code == 0 and replay["identical"], err
    assert {e["replayed_digest"] for e in replay["episodes"]} == {e["digest"] for e in run["episodes"]}
    code, fsck, err = cli("cassettes", "verify", "--store", store, site=site, cwd=tmp_path)
    assert code == 0 and fsck["ok"], err

    bundle = tmp_path / "run.tar.gz"  # dirstore -> bundle -> SQLite, replayed there
    code, _, err = cli(
        "cassettes", "export", run["run_id"], "--store", store, "-o", str(bundle), site=site, cwd=tmp_path
    )
    assert code == 0, err
    sqlite = str(tmp_path / "sqlite")
    assert cli("cassettes", "import", str(bundle), "--store", sqlite, site=None, cwd=tmp_path)[0] == 0
    code, replay, err = cli("replay", run["run_id"], "--store", sqlite, site=None, cwd=tmp_path)
    assert code == 0 and replay["identical"], err


def test_the_shipped_bundle_imports_into_a_plugin_store_and_replays_identical(
    site: Path, tmp_path: Path
) -> None:
    store = f"dirstore:{tmp_path / 'dir'}"
    code, report, err = cli("cassettes", "import", str(BUNDLE), "--store", store, site=site, cwd=REPO)
    assert code == 0, err
    training = report["root"]["id"]
    code, fsck, err = cli("cassettes", "verify", "--store", store, site=site, cwd=REPO)
    assert code == 0 and fsck["ok"], err
    code, replay, err = cli("replay", training, "--store", store, site=site, cwd=REPO)
    assert code == 0 and replay["identical"], err


def test_without_the_plugin_its_scheme_is_one_line(tmp_path: Path) -> None:
    code, _, err = cli("runs", "--store", f"dirstore://{tmp_path}", site=None, cwd=tmp_path)
    assert code != 0
    assert (
        err.strip().startswith("Error: unknown store backend 'dirstore'")
        and len(err.strip().splitlines()) == 1
    )
