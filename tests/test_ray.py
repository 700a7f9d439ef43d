"""The Ray executor on a two-node cluster on loopback (``ray.cluster_utils.Cluster``).

The worker-kill test runs last: it replaces a node of the shared cluster.

The head takes no episodes (0 CPUs); two worker nodes take one episode at a time
each and carry the custom ``docker`` resource. One cluster for the whole module
(Ray starts slowly). Episodes travel by content: the workers read no harness tree or
task folder of the driver's. Results must equal the inline ones: same run id, same
cassette ids, same digests.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from replaykit.cassette.store import Store
from replaykit.episodes.config import load_config
from replaykit.episodes.config_paths import TEMPLATES
from replaykit.episodes.harness import commit_all
from replaykit.episodes.replay import replay_run
from replaykit.episodes.run import measure
from replaykit.testing import small_config, write_config
from tests.test_run import cli

if TYPE_CHECKING:
    from ray.cluster_utils import Cluster

pytestmark = pytest.mark.ray  # starts Ray clusters

MB = 1024 * 1024
NODE: dict[str, Any] = {
    "num_cpus": 1,
    "memory": 768 * MB,
    "object_store_memory": 80 * MB,
    "resources": {"docker": 1},
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    ray = pytest.importorskip("ray")  # here, not at collection: importing Ray costs ~0.6 s of CPU
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "memory": 512 * MB,
            "object_store_memory": 80 * MB,
            "include_dashboard": False,
        },
    )
    for _ in range(2):
        c.add_node(**NODE)
    ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()  # type: ignore[no-untyped-call]  # ray.cluster_utils is untyped


def test_the_executor_benchmark_runs_both_halves_small() -> None:
    """benchmarks/executor_scaling.py at its smallest, Ray included (its Ray half wrote
    ``executor.workers`` under ``kind: ray``, refused since the kinds' settings are typed, and
    stopped there: part 2 never ran). Its own private Ray instance (``address: local``)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "executor_scaling.py"
    args = ["--tasks", "1", "--workers", "1", "--sleep-workers", "1", "--sleep", "0.05", "--repeats", "1"]
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for line in (
        "local pool   1 workers  CPU",  # part 1: a recorded run on the local pool, then on Ray
        "ray          1 workers  CPU",
        "local pool  1 workers  CPU",  # part 2: sleep-bound jobs on each
        "ray         1 workers  CPU",
    ):
        assert line in proc.stdout, proc.stdout


def _ray(address: str, **extra: Any) -> dict[str, Any]:
    # the whole section: the quickstart's executor.workers is a setting of the local kind, refused under ray
    return {"executor": {"kind": "ray", "address": address, "memory_mb": 256}, **extra}


def test_quickstart_panel_on_ray_equals_inline(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "ray").mkdir()
    (tmp_path / "inline").mkdir()
    on_ray = measure(load_config(write_config(tmp_path / "ray", _ray(cluster.address))))
    inline = measure(load_config(write_config(tmp_path / "inline")))
    assert len(on_ray.recorded) == len(inline.recorded) == inline.run.total >= 16
    assert on_ray.run.run_id == inline.run.run_id
    assert on_ray.run.cassettes == inline.run.cassettes
    assert [e.digest for e in on_ray.run.episodes] == [e.digest for e in inline.run.episodes]
    store = Store(tmp_path / "ray" / "store")
    episode = store.get_episode(on_ray.run.cassettes[0])
    assert episode.meta["task"]["path"].startswith(
        str(Path(__file__).resolve().parent.parent / "envs")
    )  # the driver's path
    assert replay_run(store, on_ray.run.run_id)["identical"]


def test_a_training_replays_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [
                str(Path(__file__).resolve().parent.parent / "envs" / t)
                for t in ("hello-file", "fix-config-port")
            ],
            "train.epochs": 3,
        },
    )
    trained = json.loads(cli("train", str(config), "--json").stdout)
    replayed = cli(
        "replay",
        trained["training_id"],
        "--store",
        str(tmp_path / "store"),
        "--ray",
        cluster.address,
        "--json",
    )
    assert replayed.stdout.strip(), f"replay printed nothing; stderr:\n{replayed.stderr[-3000:]}"
    report = json.loads(replayed.stdout)
    assert report["identical"] and report["final_baseline"] == trained["final_baseline"]
    assert report["runs"] and all(r["identical"] for r in report["runs"])


@pytest.mark.docker
def test_docker_episodes_run_on_a_worker_node(
    cluster: Cluster, docker_base: str, docker_config: Any, tmp_path: Path
) -> None:
    tasks = {
        "panel.tasks": [str(Path(__file__).resolve().parent.parent / "envs" / "hello-file")],
        "panel.seeds": [0],
    }
    (tmp_path / "ray").mkdir()
    (tmp_path / "inline").mkdir()
    on_ray = measure(load_config(docker_config(tmp_path / "ray", {**tasks, **_ray(cluster.address)})))
    inline = measure(load_config(docker_config(tmp_path / "inline", tasks)))
    assert on_ray.run.run_id == inline.run.run_id and len(on_ray.recorded) == 1
    assert [e.digest for e in on_ray.run.episodes] == [e.digest for e in inline.run.episodes]
    episode = Store(tmp_path / "ray" / "store").get_episode(on_ray.run.cassettes[0])
    assert episode.meta["environment"]["kind"] == "docker" and episode.env_events


def test_certify_fans_out_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    from replaykit.episodes.certify import certify_run
    from replaykit.execution.ray_executor import RayExecutor

    config = small_config(
        tmp_path, tasks=["hello-file", "fix-config-port", "count-error-lines"], seeds=[0, 1]
    )
    run = measure(config).run
    store = Store(config.store_path)
    on_ray = certify_run(store, run.run_id, refresh=True, executor=RayExecutor(cluster.address))
    inline = certify_run(store, run.run_id, refresh=True)
    assert on_ray["certified"] and len(on_ray["tasks"]) == 3
    strip = [{k: v for k, v in row.items() if k != "reused"} for row in on_ray["tasks"]]
    assert strip == [{k: v for k, v in row.items() if k != "reused"} for row in inline["tasks"]]
    reused = certify_run(store, run.run_id, executor=RayExecutor(cluster.address))
    assert all(row["reused"] for row in reused["tasks"])  # the driver stored the certificates


@pytest.mark.docker
def test_docker_nodes_get_the_drivers_base_images(
    cluster: Cluster, docker_base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node lacking a base image gets it loaded from the object store, same ID; a node
    that holds it is sent nothing. (One engine here: the image is removed after the
    driver saved it, so to the nodes it is a base image only the driver has.)"""
    import io
    import tarfile
    import uuid

    import ray

    from replaykit.envs.docker import node_images as ray_images
    from replaykit.envs.docker.images import docker_client, image_exists
    from replaykit.execution.ray_executor import RayNodes

    client = docker_client()
    ref = f"replaykit-test/shipped:{uuid.uuid4().hex[:12]}"
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        data = ref.encode()
        info = tarfile.TarInfo("marker.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    repo, tag = ref.split(":")
    client.api.import_image_from_data(layer.getvalue(), repository=repo, tag=tag)
    image_id = image_exists(client, ref)
    assert image_id
    assert ray_images.wanted_images({"debian:12": ref}) == {
        docker_base: image_exists(client, docker_base),
        ref: image_id,
        **ray_images.wanted_images(),
    }
    saved = ray_images.save_image(ref)
    client.images.remove(ref, force=True)
    assert image_exists(client, ref) is None
    monkeypatch.setattr(ray_images, "save_image", lambda r: saved if r == ref else pytest.fail(r))
    try:
        nodes = RayNodes(ray).ids(ray_images.DOCKER_RESOURCE)
        assert len(nodes) == 2
        sent = ray_images.ship_images(RayNodes(ray), {ref: image_id})
        assert sent == {node: [ref] for node in nodes}
        assert image_exists(client, ref) == image_id  # loaded under its tag, with the same ID
        assert ray_images.ship_images(RayNodes(ray), {ref: image_id}) == {}  # held now: nothing sent
    finally:
        client.images.remove(ref, force=True)


def test_short_jobs_are_batched_and_each_result_comes_back_with_its_job(cluster: Cluster) -> None:
    import operator

    import ray

    from replaykit.execution.ray_executor import RayExecutor

    executor = RayExecutor(cluster.address)
    assert executor._batch_size(ray, 48) == 3  # two 1-CPU nodes: 8 tasks per slot
    results = list(executor.map(operator.neg, range(48), batch=True))
    assert sorted(job for job, _ in results) == list(range(48))
    assert all(result == -job for job, result in results)


def _blocking_harness(repo: Path, marks: Path) -> None:
    """The quickstart harness, held at its start until ``marks/release`` exists; each
    start leaves a mark naming the Ray node it runs on."""
    shutil.copytree(TEMPLATES / "quickstart", repo, ignore=shutil.ignore_patterns("__pycache__"))
    source = (repo / "harness.py").read_text()
    source += f"""

_quickstart_solve = solve


def solve(task, env, llm, ctx):
    import os, pathlib, time
    import ray
    marks = pathlib.Path({str(marks)!r})
    (marks / f"{{task.id}}-{{ctx.seed}}-{{os.getpid()}}").write_text(ray.get_runtime_context().get_node_id())
    while not (marks / "release").exists():
        time.sleep(0.05)
    return _quickstart_solve(task, env, llm, ctx)
"""
    (repo / "harness.py").write_text(source)
    import git

    commit_all(git.Repo.init(repo, initial_branch="main"), "blocking harness")


def test_a_worker_node_killed_mid_episode_is_retried_elsewhere(cluster: Cluster, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    _blocking_harness(tmp_path / "harness-repo", marks)
    config = small_config(
        tmp_path,
        tasks=["hello-file", "fix-config-port"],
        seeds=[0, 1],
        **_ray(cluster.address, **{"harness.repo": str(tmp_path / "harness-repo"), "harness.template": None}),
    )
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = measure(config)
        except BaseException as exc:  # reported below
            outcome["error"] = exc

    driver = threading.Thread(target=run)
    driver.start()
    try:
        deadline = time.monotonic() + 120
        while not any(marks.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        first = next(iter(marks.iterdir()))
        victim_id = first.read_text()
        victim = next(n for n in cluster.worker_nodes if n.node_id == victim_id)
        cluster.remove_node(victim, allow_graceful=False)  # kills the raylet and the episode's worker
        cluster.add_node(**NODE)  # the cluster is two workers again
    finally:
        (marks / "release").write_text("go")
        driver.join(300)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert len(result.recorded) == len(set(result.recorded)) == 4
    starts: dict[str, set[str]] = {}
    for mark in marks.iterdir():
        if mark.name != "release":
            starts.setdefault(mark.name.rsplit("-", 1)[0], set()).add(mark.read_text())
    assert any(
        victim_id in nodes and len(nodes) > 1 for nodes in starts.values()
    )  # started on the victim, finished elsewhere
    store = Store(config.store_path)
    rows = store.list_cassettes()
    assert sorted(r["id"] for r in rows) == sorted(result.run.cassettes)  # stored once each, none half
    assert all(r["n_llm"] >= 1 and r["reward"] is not None for r in rows)
