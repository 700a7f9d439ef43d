"""Bundles of key format 1 keep importing, replaying and auditing.

``tests/data/format1/`` holds the two bundles shipped before key format 2 (copied from
``cassettes/`` as they were: the quickstart training on the built-in reference model, and
``configs/real-model.yaml``'s training on SmolLM2 in Docker, whose keys hold the recorder's
task image IDs and its engine's URL). A store that imports one keeps its format-1 keys, and
every command a receiver runs on it works: replay of the training and of each run, audit of
each verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replaykit.cassette.store import Store
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "format1"


@pytest.mark.parametrize("name", ["quickstart-training", "real-model-training"])
def test_a_format1_bundle_imports_replays_and_audits(tmp_path: Path, name: str) -> None:
    store = tmp_path / "store"
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}  # a receiver without Docker
    imported = cli("cassettes", "import", str(DATA / f"{name}.tar.gz"), "--store", str(store), "--json")
    assert imported.returncode == 0, imported.stderr
    training = json.loads(imported.stdout)["root"]["id"]
    st = Store(store, readonly=True)
    doc = st.get_training(training)
    formats = {
        json.loads(st.cassette_row(c)["key_json"])["format"] for c in st.get_run(doc.runs[0]).cassettes
    }
    assert formats == {1}, formats  # the fixture is what it says
    replayed = cli("replay", training, "--store", str(store), "--json", cwd=REPO, env=env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)
    assert report["identical"] and report["runs"] and all(r["identical"] for r in report["runs"])
    for run_id in doc.runs:
        one = cli("replay", run_id, "--store", str(store), "--json", env=env)
        assert one.returncode == 0 and json.loads(one.stdout)["identical"], one.stdout + one.stderr
    assert doc.verdicts
    for verdict in doc.verdicts:
        audited = cli("audit", verdict, "--store", str(store), "--json", env=env)
        assert audited.returncode == 0, audited.stderr
        assert json.loads(audited.stdout)["reproduced"]
