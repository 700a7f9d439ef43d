"""Builds through the frozen network (issue 31 item 1): a task image whose Dockerfile
pip-installs from PyPI over TLS (reachable only through the host, so only through the proxy)
and apt-installs from the Debian mirror builds with the proxy's CA trusted; ``run`` keeps the
build's exchanges with the image; a bundle *without* images, imported on an engine that lacks
the image, rebuilds it offline from that recording to the same image digest and certifies
deterministic, and a build that is not reproducible (it writes the clock) is said to be so."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import git
import pytest
import yaml

from replaykit.cassette.store import Store
from replaykit.envs.docker.images import docker_client
from replaykit.envs.docker.network import server
from replaykit.envs.docker.network.build import read_facts, read_recording
from replaykit.envs.docker.recipe import find_image, is_recipe
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli
from tests.envs.docker.network.test_frozen_docker import commit, run_json

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

DOCKERFILE = """FROM replaykit/base:bookworm-python
RUN echo {nonce} > /etc/replaykit-nonce
RUN PIP_NO_INDEX=0 pip install --no-cache-dir --disable-pip-version-check six==1.16.0
RUN apt-get update && apt-get install -y --no-install-recommends tree && rm -rf /var/lib/apt/lists/*
WORKDIR /app
"""
CLOCK = "FROM replaykit/base:bookworm\nRUN echo {nonce} > /etc/replaykit-nonce && date +%s%N > /built-at\nWORKDIR /app\n"
VERIFY = """#!/usr/bin/env bash
mkdir -p /logs/verifier
if python3 -c 'import six' && command -v tree >/dev/null; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
"""


def task(root: Path, name: str, dockerfile: str, verify: str) -> Path:
    folder = root / name
    for sub in ("environment", "tests", "solution"):
        (folder / sub).mkdir(parents=True)
    (folder / "environment" / "Dockerfile").write_text(dockerfile.format(nonce=uuid.uuid4().hex))
    (folder / "instruction.md").write_text(f"Task {name}: nothing to do.\n")
    (folder / "task.toml").write_text(
        'version = "2.0"\n[environment]\nallow_internet = true\nbuild_timeout_sec = 600.0\n'
    )
    (folder / "tests" / "test.sh").write_text(verify)
    (folder / "solution" / "solve.sh").write_text("#!/usr/bin/env bash\ntrue\n")
    return folder


def image_of(store: Path, cassette: str) -> str:
    """The image the cassette's key names: its recipe."""
    row = Store(store).cassette_row(cassette)
    return str(dict(json.loads(str(row["key_json"]))["extra"])["image"])


def local(image: str) -> str:
    """This engine's image of a key's recipe."""
    found = find_image(docker_client(), image)
    assert found is not None, image
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    problem = server.check()
    if problem:
        pytest.fail(problem, pytrace=False)
    tmp = tmp_path_factory.mktemp("build-replay")
    pypi = task(tmp, "pypi-build", DOCKERFILE, VERIFY)
    clock = task(
        tmp, "clock-build", CLOCK, "#!/bin/sh\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n"
    )
    repo = git.Repo.init(tmp / "harness", initial_branch="main")
    sha = commit(repo, ["python3 -c 'import six; print(six.__version__)'"])
    config = write_config(
        tmp,
        {
            "panel.tasks": [str(pypi), str(clock)],
            "panel.seeds": [0],
            "env.kind": "docker",
            "env.timeout_sec": 120,
            "harness.template": None,
        },
    )
    doc = yaml.safe_load(config.read_text())
    doc["env"].pop("image_aliases", None)
    config.write_text(yaml.safe_dump(doc))
    run = run_json("run", str(config), "--harness", sha, env={})
    yield {"tmp": tmp, "run": run, "store": tmp / "store", "tasks": [pypi, clock]}


def test_the_build_fetches_pypi_over_tls_through_the_proxy_and_keeps_it_with_the_image(built: Any) -> None:
    run = built["run"]
    assert run["solved"] == 2, run
    listing = run_json("net", "ls", run["run_id"], "--store", str(built["store"]), env={})
    urls = [b["url"] for b in listing["image_builds"]]
    assert "https://pypi.org/simple/six/" in urls, urls
    assert any(u.startswith("https://files.pythonhosted.org/") and u.endswith(".whl") for u in urls), urls
    assert any(u.startswith("http://") and u.endswith(".deb") for u in urls), urls
    assert all(b["status"] == 200 for b in listing["image_builds"]), listing["image_builds"]
    images = {image_of(built["store"], c) for c in run["cassettes"]}
    assert {b["image"] for b in listing["image_builds"]} <= images
    for image in images:  # the machine keeps each build beside its image too, with its digest
        assert is_recipe(image) and "+" in image  # a recipe, and what its build fetched
        facts = read_facts(local(image))
        assert facts is not None and facts["recorded"] and facts["digest"], facts


def test_a_bundle_without_images_rebuilds_offline_to_the_same_digest(built: Any) -> None:
    """Last: removes both task images (the import rebuilds one; the other is not reproducible)."""
    tmp, run = built["tmp"], built["run"]
    bundle = tmp / "no-images.tar"
    out = run_json(
        "cassettes", "export", run["run_id"], "-o", str(bundle), "--store", str(built["store"]), env={}
    )
    assert out.get("images", []) == []
    recorded = {local(image_of(built["store"], c)): c for c in run["cassettes"]}
    digests = {image: read_facts(image)["digest"] for image in recorded}  # type: ignore[index]
    for image in recorded:
        subprocess.run(["docker", "rmi", "-f", image], check=True, capture_output=True, timeout=120)
    fresh = tmp / "fresh"
    run_json("cassettes", "import", str(bundle), "--store", str(fresh), env={})
    args = ("certify", run["run_id"], "--store", str(fresh), *(f"--tasks={t}" for t in built["tasks"]))
    proc = cli(*args, "--json", cwd=REPO_ROOT, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one task is not reproducible
    report = {t["task_id"]: t for t in json.loads(proc.stdout)["tasks"]}
    assert report["pypi-build"]["status"] == "deterministic", report["pypi-build"]
    clock = report["clock-build"]
    assert clock["status"] == "error" and "not reproducible" in clock["reason"], clock
    assert "\n" not in clock["reason"] and "--with-images" in clock["reason"]
    rebuilt = subprocess.run(
        ["docker", "images", "-q", "--no-trunc", "--filter", "label=replaykit.task=pypi-build"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert rebuilt and not set(rebuilt) & set(recorded)  # a new image ID …
    facts = read_facts(rebuilt[0])
    pypi_image = next(
        i for i, c in recorded.items() if "pypi" in Store(built["store"]).cassette_row(c)["task_id"]
    )
    assert facts is not None and facts["digest"] == digests[pypi_image]  # … with the recorded digest
    served = read_recording(rebuilt[0])
    assert served and {r["source"] for r in served} == {"store"}, served  # nothing fetched live
