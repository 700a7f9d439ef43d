"""A second machine (issue 36 item 6): what one machine records, another reuses and replays.

Machine one: a fresh clone's layout in folder ``a``, the suite's base images, the task model
served by a reference server on one port; it trains (2 epochs) and compares two harnesses ×
two models in Docker, and exports both as bundles. Machine two: another folder ``b``, its own
base image built by another debootstrap under another tag namespace
(``replaykit-second/base:bookworm``: other image IDs, so other task image IDs, of the same
recipe), its task images built there, the reference server on another port, Docker running.
It imports the bundles and shows: the training replays identical; ``compare --record-mode
none`` reuses every arm (0 model calls, the same runs, no key taken from the recording: its
own images have the recorded recipes); ``regrade`` of a training run then ``replay TRAINING``
identical; ``reproduce`` of each bundle identical from a third folder.

The second base image is built once per machine and kept (its tag), as the first one is
(``docker_base``): a debootstrap costs minutes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from replaykit.envs.docker import images
from replaykit.envs.docker.base_image import build_base_image
from replaykit.models.reference.server import ReferenceServer
from tests.cli_runner import cli

pytestmark = [pytest.mark.docker, pytest.mark.e2e]
REPO = Path(__file__).resolve().parents[3]
SECOND_BASE = "replaykit-second/base:bookworm"
TASKS = ["../envs/hello-file", "../envs/organize-files"]
MODELS = "reference-weak,reference-strong"


def run(*args: str, cwd: Path) -> Any:
    proc = cli(*args, "--json", cwd=cwd, timeout=1200)
    assert proc.returncode == 0, f"replaykit {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout)


def machine(root: Path, base_url: str, aliases: dict[str, str]) -> Path:
    """A fresh clone's layout under ``root``: its config trains a small panel in Docker against
    ``base_url`` into ``root/cassettes``, its FROM images aliased to ``aliases``."""
    for folder in ("configs", "envs"):
        shutil.copytree(REPO / folder, root / folder)
    data = yaml.safe_load((REPO / "configs" / "quickstart-docker.yaml").read_text())
    data["name"] = "second-machine"
    data["model"].update(base_url=base_url, api_key_env="")
    data["panel"] = {"tasks": TASKS, "seeds": [0]}
    data["env"]["image_aliases"] = aliases
    data["train"]["epochs"] = 2
    path = root / "configs" / "second-machine.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def second_base(docker_base: str) -> str:
    """Machine two's base image: another debootstrap, under another tag (built once, kept)."""
    build_base_image(tag=SECOND_BASE)
    client = images.docker_client()
    assert images.image_exists(client, SECOND_BASE) != images.image_exists(client, docker_base)
    return SECOND_BASE


@pytest.fixture(scope="module")
def recorded(docker_base: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Machine one: a training and a comparison, recorded and exported."""
    tmp = tmp_path_factory.mktemp("machine-one")
    with ReferenceServer() as server:
        config = machine(tmp / "a", server.base_url, {})
        training = run("train", str(config), cwd=tmp / "a")
        harnesses = f"untrained={training['initial_sha']},trained={training['final_baseline']}"
        compared = run("compare", str(config), "--models", MODELS, "--harness", harnesses, cwd=tmp / "a")
        store = str(tmp / "a" / "cassettes")
        bundles = {"training": tmp / "training.tar.gz", "compare": tmp / "compare.tar.gz"}
        for what, ident in (("training", training["training_id"]), ("compare", compared["compare_id"])):
            run("cassettes", "export", ident, "-o", str(bundles[what]), "--store", store, cwd=tmp)
        yield {
            "tmp": tmp,
            "port": server.base_url,
            "training": training,
            "compare": compared,
            "harnesses": harnesses,
            "bundles": bundles,
        }


@pytest.fixture(scope="module")
def second(recorded: dict[str, Any], second_base: str) -> Iterator[dict[str, Any]]:
    """Machine two: its own base, folder and port; the bundles imported; its task images built."""
    root = recorded["tmp"] / "b"
    aliases = {"debian:bookworm-slim": second_base}
    with ReferenceServer() as server:
        assert server.base_url != recorded["port"]
        config = machine(root, server.base_url, aliases)
        store = str(root / "cassettes")
        for bundle in recorded["bundles"].values():
            run("cassettes", "import", str(bundle), "--store", store, cwd=root)
        checked = run(
            "tasks",
            "check",
            *(str(root / "envs" / t.split("/")[-1]) for t in TASKS),
            "--config",
            str(config),
            cwd=root,
        )
        assert checked["ok"], checked
        yield {"root": root, "config": config, "store": store, "server": server}


def test_machine_two_builds_other_images_of_the_same_recipes(second: dict[str, Any]) -> None:
    client = images.docker_client()
    for task in TASKS:
        name = task.split("/")[-1]
        labelled = client.images.list(filters={"label": [f"replaykit.task={name}", "replaykit.recipe"]})
        recipes = {i.labels["replaykit.recipe"] for i in labelled}
        ids = {i.id for i in labelled}
        assert len(recipes) == 1 and len(ids) >= 2, (name, recipes, ids)  # one recipe, two machines' images


def test_the_training_replays_identical_with_docker_up(
    recorded: dict[str, Any], second: dict[str, Any]
) -> None:
    replayed = run(
        "replay", recorded["training"]["training_id"], "--store", second["store"], cwd=second["root"]
    )
    assert replayed["identical"] and all(r["identical"] for r in replayed["runs"]), replayed


def test_compare_replay_only_reuses_every_arm(recorded: dict[str, Any], second: dict[str, Any]) -> None:
    args = ("compare", str(second["config"]), "--models", MODELS, "--harness", recorded["harnesses"])
    proc = cli(*args, "--record-mode", "none", "--json", cwd=second["root"], timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    again = json.loads(proc.stdout)
    assert again["model_calls"] == 0 and all(c["recorded"] == 0 for c in again["cells"])
    assert [c["run_id"] for c in again["cells"]] == [c["run_id"] for c in recorded["compare"]["cells"]]
    assert again["compare_id"] == recorded["compare"]["compare_id"]
    assert "with the env keys they were recorded with" not in proc.stderr  # its own images' recipes


def test_regrade_then_the_training_still_replays(recorded: dict[str, Any], second: dict[str, Any]) -> None:
    first = recorded["training"]["epochs"][0]["baseline_run"]
    regraded = run("regrade", first, "--store", second["store"], cwd=second["root"])
    assert regraded["reproduced"] and regraded["regraded_from"] == first
    replayed = run(
        "replay", recorded["training"]["training_id"], "--store", second["store"], cwd=second["root"]
    )
    assert replayed["identical"], replayed


def test_reproduce_from_another_folder(recorded: dict[str, Any], second: dict[str, Any]) -> None:
    elsewhere = recorded["tmp"] / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    for bundle in recorded["bundles"].values():
        done = run("reproduce", str(bundle), cwd=elsewhere)
        assert done["identical"], done
