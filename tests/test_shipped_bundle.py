"""The shipped bundles (cassettes/quickstart-training.tar.gz, made by scripts/make-shipped-bundle.sh;
cassettes/real-model-training.tar.gz, configs/real-model.yaml's live training on SmolLM2 in Docker)
import into a fresh store and replay and audit with no model, no engine and no Docker at all
(sockets blocked, DOCKER_HOST a socket nobody serves), and on a receiver with Docker up and the
panel's task images built there, on every run: a change of the cassette or bundle format must
come with a version bump and a migration, or this fails."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.envs.docker import images
from replaykit.envs.docker.image_build import ensure_task_image
from replaykit.envs.tasks import load_task
from replaykit.train.audit import audit, replay_training
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


REPO = Path(__file__).resolve().parent.parent
BUNDLE = REPO / "cassettes" / "quickstart-training.tar.gz"
REAL_MODEL = REPO / "cassettes" / "real-model-training.tar.gz"  # 4 runs × 16 episodes on SmolLM2
FORMAT1_REAL_MODEL = REPO / "tests" / "data" / "format1" / "real-model-training.tar.gz"  # key format 1


@pytest.mark.parametrize(
    "bundle",
    # a docker-kind training's keys hold its task images' IDs: with no Docker daemon to ask, its
    # replay takes them from the recorded cassettes (each one's id derived again from its key)
    [pytest.param(BUNDLE, id="quickstart"), pytest.param(REAL_MODEL, id="real-model")],
)
def test_shipped_training_imports_and_replays_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bundle: Path
) -> None:
    out = cli("cassettes", "import", str(bundle), "--store", str(tmp_path / "store"), "--json", cwd=REPO)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["root"]["kind"] == "training"
    training_id = report["root"]["id"]
    no_docker = tmp_path / "no-docker.sock"  # nothing listens: the Docker SDK's connection fails
    monkeypatch.setenv("DOCKER_HOST", f"unix://{no_docker}")
    monkeypatch.setattr(images, "_clients", {})  # not a client an earlier test of this worker connected

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the shipped bundle's replay tried to open a socket")

    connect = socket.socket.connect

    def refuse_but_no_docker(sock: socket.socket, address: Any) -> None:
        if sock.family != socket.AF_UNIX or str(address) != str(no_docker):
            refuse()
        connect(sock, address)  # FileNotFoundError: no Docker here

    monkeypatch.setattr(socket.socket, "connect", refuse_but_no_docker)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.chdir(REPO)
    store = Store(tmp_path / "store", readonly=True)
    replayed = replay_training(store, training_id)
    assert replayed["identical"] and replayed["epochs"] and all(r["identical"] for r in replayed["runs"]), (
        replayed
    )
    doc = store.get_training(training_id)
    assert doc.verdicts, "the shipped training holds no verdict"
    for verdict_id in doc.verdicts:
        assert audit(store, verdict_id)["reproduced"]


@pytest.mark.docker
@pytest.mark.parametrize(
    "bundle", [pytest.param(REAL_MODEL, id="shipped"), pytest.param(FORMAT1_REAL_MODEL, id="format-1")]
)
def test_the_real_model_bundle_replays_on_a_receiver_with_docker_up(
    tmp_path: Path, docker_base: str, bundle: Path
) -> None:
    """A receiver's machine: Docker running, the panel's task images built here (as `tasks check
    'configs/real-model/tasks/*'` leaves them: other image IDs than the recorder's), and a folder
    that is not a checkout: the imported training replays identical."""
    for folder in sorted((REPO / "configs" / "real-model" / "tasks").iterdir()):
        ensure_task_image(load_task(folder))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = str(tmp_path / "store")
    imported = cli("cassettes", "import", str(bundle), "--store", store, "--json", cwd=elsewhere, check=True)
    training = json.loads(imported.stdout)["root"]["id"]
    replayed = cli("replay", training, "--store", store, "--json", cwd=elsewhere)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    report = json.loads(replayed.stdout)
    assert report["identical"] and len(report["runs"]) == 4 and all(r["identical"] for r in report["runs"])


def test_the_shipped_bundle_is_the_training_the_quickstart_makes_today(tmp_path: Path) -> None:
    """``replaykit train configs/quickstart.yaml`` on a fresh clone makes the training the bundle
    holds: the same id, resumed from the bundle's cassettes with the same candidates and
    decisions. When a change moves the quickstart's ids, regenerate the bundle (the message says how)."""
    for folder in ("configs", "envs"):  # a fresh clone's layout: the config's ../ paths as written
        shutil.copytree(REPO / folder, tmp_path / folder)
    store = tmp_path / "cassettes"  # configs/quickstart.yaml's store: ../cassettes
    imported = cli("cassettes", "import", str(BUNDLE), "--store", str(store), "--json", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    shipped = json.loads(imported.stdout)["root"]["id"]
    proc = cli("train", "configs/quickstart.yaml", "--json", cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr
    made = json.loads(proc.stdout)
    assert made["training_id"] == shipped, (
        f"cassettes/quickstart-training.tar.gz holds training {shipped}, but `replaykit train "
        f"configs/quickstart.yaml` makes {made['training_id']} today: regenerate it with "
        "`bash scripts/make-shipped-bundle.sh` (it rewrites the README's sample outputs too)"
    )
    doc = Store(store, readonly=True).get_training(shipped)
    recorded = [(e.candidate_sha, e.decision) for e in doc.epochs]
    assert [(e["candidate_sha"], e["decision"]) for e in made["epochs"]] == recorded
    assert made["final_baseline"] == doc.final_baseline
