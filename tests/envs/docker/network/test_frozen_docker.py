"""The frozen network end to end (issue 19's done-when): a task whose image apt-installs a
package, whose agent pip-installs one and whose verifier fetches a file over HTTPS from a
loopback server with its own certificate. ``run`` records it live; an offline replay with
every route cut (``unshare -n``) is identical; ``certify`` with the upstream gone says
deterministic; so does a fresh store the bundle was imported into. An unrecorded request
fails certify with one line naming its URL; a ``live`` run is ``network unfrozen``. The
store's CA key is in no bundle, cassette or output."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import git
import pytest
import yaml

from replaykit.cassette.store import Store
from replaykit.envs.docker.images import docker_client
from replaykit.envs.docker.network import server
from replaykit.envs.docker.network.ca import ensure_ca
from replaykit.envs.docker.recipe import find_image
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli
from tests.envs.docker.network.https_server import FileServer

pytestmark = [pytest.mark.docker, pytest.mark.e2e]
TASK = Path(__file__).resolve().parent / "task"
PIP = "PIP_NO_INDEX=0 pip install --no-cache-dir --disable-pip-version-check six==1.16.0 && python3 -c 'import six; print(six.__version__)'"
HARNESS = "def solve(task, env, llm, ctx):\n    for action in {actions!r}:\n        env.run(action)\n"


def commit(repo: git.Repo, actions: list[str]) -> str:
    (Path(repo.working_dir) / "harness.py").write_text(HARNESS.format(actions=actions))
    repo.index.add(["harness.py"])
    return repo.index.commit(f"harness: {len(actions)} action(s)").hexsha


def allowing(config: Path, srv: FileServer) -> Path:
    """``config`` with ``srv`` (on the host's loopback) in ``env.network_allow``: the frozen
    network refuses the host's loopback otherwise."""
    doc = yaml.safe_load(config.read_text())
    doc["env"]["network_allow"] = [*doc["env"].get("network_allow", []), srv.url.removeprefix("https://")]
    out = config.with_name(f"allow-{srv.server.server_address[1]}.yaml")
    out.write_text(yaml.safe_dump(doc))
    return out


def run_json(*args: str, env: dict[str, str], check: bool = True, prefix: tuple[str, ...] = ()) -> Any:
    if prefix:
        proc = subprocess.run(
            [*prefix, sys.executable, "-m", "replaykit.cli", *args, "--json"],
            capture_output=True,
            text=True,
            timeout=900,
            env={**__import__("os").environ, **env},
            cwd=REPO_ROOT,
        )
    else:
        proc = cli(*args, "--json", env=env, cwd=REPO_ROOT, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"replaykit {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return json.loads(proc.stdout) if proc.returncode == 0 else proc


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Any:
    problem = server.check()
    if problem:
        pytest.fail(problem, pytrace=False)
    tmp = tmp_path_factory.mktemp("frozen")
    files = tmp / "files"
    files.mkdir()
    (files / "data.txt").write_bytes(b"frozen file\n" + b"x" * 5000)
    srv = FileServer(files, tmp).__enter__()
    env = {
        "REPLAYKIT_NET_UPSTREAM_CA": str(srv.cert),
        "REPLAYKIT_TEST_FILE_URL": f"{srv.url}/data.txt",
    }
    repo = git.Repo.init(tmp / "harness", initial_branch="main")
    sha = commit(repo, [PIP])
    config = write_config(
        tmp,
        {
            "panel.tasks": [str(TASK)],
            "panel.seeds": [0],
            "env.kind": "docker",
            "env.timeout_sec": 300,
            "harness.template": None,
        },
    )
    doc = yaml.safe_load(config.read_text())
    doc["env"].pop("image_aliases", None)
    config.write_text(yaml.safe_dump(doc))
    config = allowing(config, srv)
    run = run_json("run", str(config), "--harness", sha, env=env)
    yield {
        "tmp": tmp,
        "srv": srv,
        "env": env,
        "run": run,
        "config": config,
        "repo": repo,
        "store": tmp / "store",
    }
    srv.stop()


def test_run_records_the_containers_fetches(frozen: Any) -> None:
    run = frozen["run"]
    assert run["solved"] == 1, run
    store = Store(frozen["store"])
    episode = store.get_episode(run["cassettes"][0])
    urls = [e.url for e in episode.net_events]
    assert any(u.endswith("/six/") or "/simple/six" in u for u in urls), urls  # pip's index page
    assert any(u.endswith("six-1.16.0-py2.py3-none-any.whl") for u in urls), urls  # the wheel
    assert f"{frozen['srv'].url}/data.txt" in urls  # the verifier's HTTPS fetch
    assert all(e.chunks or e.size == 0 for e in episode.net_events)
    limits = episode.meta["environment"]["limits"]
    assert isinstance(limits, dict) and limits["network_mode"] == "frozen"
    assert frozen["srv"].requests == ["/data.txt"]


def test_replay_with_every_route_cut_is_identical(frozen: Any) -> None:
    run_id = frozen["run"]["run_id"]
    script = f"ip link set lo down 2>/dev/null; exec {sys.executable} -m replaykit.cli replay {run_id} --store {frozen['store']} --json"
    proc = subprocess.run(
        ["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["identical"], report


def test_certify_serves_only_the_recording(frozen: Any) -> None:
    frozen["srv"].stop()  # the upstream is gone: only the store can answer
    report = run_json(
        "certify",
        frozen["run"]["run_id"],
        "--store",
        str(frozen["store"]),
        "--tasks",
        str(TASK),
        env=frozen["env"],
    )
    assert [t["status"] for t in report["tasks"]] == ["deterministic"], report
    assert frozen["srv"].requests == ["/data.txt"]


def test_an_unrecorded_request_fails_certify_naming_its_url(frozen: Any) -> None:
    url = f"{frozen['srv'].url}/data.txt"
    nonce = f"python3 -c \"import time, urllib.request; urllib.request.urlopen('{url}?n=%d' % time.time_ns(), timeout=30)\" || true"
    with FileServer(frozen["srv"].root, frozen["tmp"] / "again") as srv:  # a live upstream to record from
        env = {
            **frozen["env"],
            "REPLAYKIT_NET_UPSTREAM_CA": str(srv.cert),
            "REPLAYKIT_TEST_FILE_URL": f"{srv.url}/data.txt",
        }
        nonce = nonce.replace(url, f"{srv.url}/data.txt")
        sha = commit(frozen["repo"], [nonce])
        run = run_json("run", str(allowing(frozen["config"], srv)), "--harness", sha, env=env)
    args = ("certify", run["run_id"], "--store", str(frozen["store"]), "--tasks", str(TASK))
    proc = cli(*args, "--json", env=env, cwd=REPO_ROOT, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    task = json.loads(proc.stdout)["tasks"][0]
    assert task["status"] == "error", task
    assert task["reason"].startswith(f"unrecorded request GET {srv.url}/data.txt?n="), task["reason"]
    assert "\n" not in task["reason"]
    text = cli(*args, env={**env, "COLUMNS": "80"}, cwd=REPO_ROOT, timeout=900)
    said = [line for line in text.stdout.splitlines() if "unrecorded request" in line]
    assert text.returncode == 1 and len(said) == 1, text.stdout
    assert "Traceback" not in text.stderr


def test_net_ls_and_cassettes_show_list_the_exchanges(frozen: Any) -> None:
    store = ["--store", str(frozen["store"])]
    doc = run_json("net", "ls", frozen["run"]["run_id"], *store, env=frozen["env"])
    urls = [r["url"] for r in doc["exchanges"]]
    assert (
        doc["kind"] == "run"
        and doc["total"] == len(urls) >= 3
        and doc["misses"] + doc["hits"] == doc["total"]
    )
    assert f"{frozen['srv'].url}/data.txt" in urls and doc["bytes"] >= 5000
    cassette = frozen["run"]["cassettes"][0]
    assert run_json("net", "ls", cassette[:10], *store, env=frozen["env"])["total"] == doc["total"]
    table = cli("net", "ls", frozen["run"]["run_id"], *store, env={"COLUMNS": "80"}, cwd=REPO_ROOT)
    assert table.returncode == 0 and "served from the store" in table.stdout and "data.txt" in table.stdout
    shown = run_json("cassettes", "show", cassette, *store, env=frozen["env"])
    net = [e for e in shown["events"] if e["kind"] == "net"]
    assert [e["url"] for e in net] == urls and all(e["status"] == 200 for e in net)
    missing = cli("net", "ls", "nosuchid", *store, cwd=REPO_ROOT)
    assert (
        missing.returncode == 1
        and "Traceback" not in missing.stderr
        and len(missing.stderr.splitlines()) == 1
    )


def test_a_live_run_is_never_certified_deterministic(frozen: Any) -> None:
    config = frozen["config"]
    doc = yaml.safe_load(config.read_text())
    doc["env"]["network"] = "live"
    live = config.with_name("live.yaml")
    live.write_text(yaml.safe_dump(doc))
    sha = commit(frozen["repo"], ["echo no fetch here"])
    with FileServer(frozen["srv"].root, frozen["tmp"] / "live") as srv:
        env = {
            **frozen["env"],
            "REPLAYKIT_NET_UPSTREAM_CA": str(srv.cert),
            "REPLAYKIT_TEST_FILE_URL": f"{srv.url}/data.txt",
        }
        run = run_json("run", str(allowing(live, srv)), "--harness", sha, env=env)
        report = run_json(
            "certify", run["run_id"], "--store", str(frozen["store"]), "--tasks", str(TASK), env=env
        )
    assert [t["status"] for t in report["tasks"]] == ["forked"], report
    assert "network unfrozen" in report["tasks"][0]["reason"] and report["deterministic"] == 0


def test_an_image_build_fetches_through_the_proxy_for_that_image(frozen: Any) -> None:
    """A fresh build (the Dockerfile changed) of a networked task: apt's HTTP fetches are recorded for the image."""
    task = frozen["tmp"] / "rebuilt"
    shutil.copytree(TASK, task)
    dockerfile = task / "environment" / "Dockerfile"
    nonce = f"RUN echo {uuid.uuid4().hex} > /etc/replaykit-rebuilt\nRUN apt-get"  # no cached layer
    dockerfile.write_text(dockerfile.read_text().replace("RUN apt-get", nonce, 1))
    config = frozen["config"]
    doc = yaml.safe_load(config.read_text())
    doc["panel"]["tasks"] = [str(task)]
    rebuilt = config.with_name("rebuilt.yaml")
    rebuilt.write_text(yaml.safe_dump(doc))
    sha = commit(frozen["repo"], ["tree --version"])
    run = run_json("run", str(rebuilt), "--harness", sha, env=frozen["env"])
    listing = run_json("net", "ls", run["run_id"], "--store", str(frozen["store"]), env=frozen["env"])
    builds = listing["image_builds"]
    assert builds and all(b["url"].startswith("http://") for b in builds), builds
    assert any("/dists/bookworm" in b["url"] for b in builds), [b["url"] for b in builds]
    assert any(b["url"].endswith(".deb") and "/tree" in b["url"] for b in builds), [b["url"] for b in builds]
    row = Store(frozen["store"]).cassette_row(run["cassettes"][0])
    assert {b["image"] for b in builds} == {dict(json.loads(row["key_json"])["extra"])["image"]}


def test_bundle_with_images_certifies_on_a_clean_engine_and_never_carries_the_ca_key(frozen: Any) -> None:
    """Last in this module: it removes the task image from the engine (the bundle brings it back)."""
    tmp, run_id = frozen["tmp"], frozen["run"]["run_id"]
    bundle = tmp / "frozen.tar"
    store = ["--store", str(frozen["store"])]
    out = run_json(
        "cassettes", "export", run_id, "-o", str(bundle), "--with-images", *store, env=frozen["env"]
    )
    row = Store(frozen["store"]).cassette_row(frozen["run"]["cassettes"][0])
    image = dict(json.loads(row["key_json"])["extra"])["image"]
    assert out["images"] == [image]
    key = ensure_ca(frozen["store"]).private_key_pem()
    canary = key.splitlines()[1]  # a line of the key's base64 body
    with open(bundle, "rb") as fh:
        while block := fh.read(1 << 24):
            assert canary not in block
    assert canary not in json.dumps(out).encode()
    assert canary not in (frozen["store"] / "index.db").read_bytes()

    here = find_image(docker_client(), image)  # this engine's image of the key's recipe
    assert here is not None
    subprocess.run(["docker", "rmi", "-f", here], check=True, capture_output=True, timeout=120)
    assert subprocess.run(["docker", "image", "inspect", here], capture_output=True).returncode != 0
    fresh = tmp / "fresh"
    imported = run_json("cassettes", "import", str(bundle), "--store", str(fresh), env=frozen["env"])
    assert imported["images_loaded"] == [image]
    report = run_json("certify", run_id, "--store", str(fresh), "--tasks", str(TASK), env=frozen["env"])
    assert [t["status"] for t in report["tasks"]] == ["deterministic"], report
    assert ensure_ca(fresh).private_key_pem() != key  # the fresh store made its own CA
    assert frozen["srv"].requests == ["/data.txt"]  # nothing reached the upstream since the recording
