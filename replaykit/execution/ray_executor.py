"""The Ray executor: episodes as Ray tasks across machines (``executor: {kind: ray}``).

Each job (an episode to record, replay or certify) becomes one Ray task with
declared resources: CPUs, memory, and the custom resource the environment kind
names (``docker`` for the docker kind: give it to the nodes that have an engine,
``ray start --resources '{"docker": 4}'``).

Nothing travels by path. A job class names its folder fields in
``portable_paths`` (the harness tree, the task folder); the driver reads each
folder once, puts its files in Ray's object store keyed by content digest, and the
worker materialises them under its own temp folder (``replaykit-ray/<digest>/``)
before running the job. Workers need Python and replaykit, no checkout and no
shared filesystem. Workers return results (episodes) to the driver, which alone
writes the store: SQLite stays single-writer.

Before episodes fan out, the environment kind may prepare the nodes
(``EnvKind.prepare_nodes``, given the cluster as ``RayNodes``): the docker kind loads
the driver's base images on Docker nodes that lack them
(:mod:`replaykit.envs.docker.node_images`), so every node has the same image IDs, the same
task image digests and cassette keys. This module knows Ray, not Docker.

Faults: a worker or node that dies mid-episode has its task retried elsewhere by
Ray (``max_retries``, bounded); only returned results are stored, so an episode is
never stored twice or half. A killed driver leaves the store as it was; rerunning
resumes from what was stored.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NotRequired, Sequence, TypedDict, TypeVar

from pydantic import Field

from replaykit.core.errors import ConfigError, ReplaykitError
from replaykit.envs.base import NodeNeeds
from replaykit.execution.batching import batch_size
from replaykit.execution.settings import ExecutorKind, ExecutorSettings

J = TypeVar("J")
R = TypeVar("R")

Files = dict[str, tuple[int, bytes]]


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("executor kind ray needs Ray: pip install 'replaykit[ray]'") from None
    return ray


def connect(address: str = "auto", num_cpus: int | None = None) -> None:
    """Join the cluster at ``address`` (``auto``: the local node's cluster; ``ray://…``:
    Ray Client) or start a private one (``local``); a driver already connected stays so."""
    ray = _ray()
    if ray.is_initialized():
        return
    kwargs: dict[str, bool] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    try:
        if address == "local":  # a new private instance even when another cluster runs on this machine
            ray.init(address="local", num_cpus=num_cpus, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"cannot connect to the Ray cluster at {address!r}: {first}; start one with `ray start --head` or set executor.address"
        ) from None


def read_folder(folder: Path) -> Files:
    """Every file under ``folder`` (relative path → mode, bytes); symlinks are followed."""
    files: Files = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            files[full.relative_to(folder).as_posix()] = (os.stat(full).st_mode & 0o777, full.read_bytes())
    return files


def materialise(digest: str, name: str, files: Files, root: Path | None = None) -> Path:
    """Write ``files`` under ``<root>/<digest>/<name>`` once (atomically); return that folder.
    The folder keeps its name: a task's id is its folder name."""
    base = (root or Path(tempfile.gettempdir()) / "replaykit-ray") / digest
    target = base / name
    if (base / ".complete").exists():
        return target
    base.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=base.parent))
    for rel, (mode, data) in files.items():
        dest = tmp / name / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        os.chmod(dest, mode or 0o644)
    (tmp / name).mkdir(exist_ok=True)
    (tmp / ".complete").write_text(digest)
    try:
        os.replace(tmp, base)
    except OSError:  # another worker on this node won the race: its copy is the same content
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _restore(value: Any, mapping: dict[str, str]) -> Any:
    """Worker paths in a result's metadata back to the driver's paths."""
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, dict):
        return {k: _restore(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v, mapping) for v in value]
    return value


def run_portable(fn: Callable[[Any], Any], job: Any, folders: dict[str, tuple[str, str, Files]]) -> Any:
    """On a worker: materialise the job's folders, point the job at them, run it."""
    local = {}
    for attr, (digest, name, files) in folders.items():
        if not isinstance(files, dict):  # an object-store reference (nested ones are not resolved for us)
            files = _ray().get(files)
        local[attr] = str(materialise(digest, name, files))
    result = fn(dataclasses.replace(job, **local) if local else job)
    meta = getattr(result, "meta", None)
    if isinstance(meta, dict) and local:
        result.meta = _restore(meta, {path: str(getattr(job, attr)) for attr, path in local.items()})
    return result


def run_portable_batch(
    fn: Callable[[Any], Any], items: list[tuple[Any, dict[str, tuple[str, str, Files]]]]
) -> list[Any]:
    """On a worker: several short jobs in one Ray task (see ``RayExecutor.map(batch=True)``)."""
    return [run_portable(fn, job, folders) for job, folders in items]


class RayNodes:
    """The cluster's alive nodes, as an env kind's ``prepare_nodes`` hook sees them
    (``envs.base.WorkerNodes``)."""

    def __init__(self, ray: Any) -> None:
        self.ray = ray

    def ids(self, resource: str | None = None) -> list[str]:
        return [
            str(node["NodeID"])
            for node in self.ray.nodes()
            if node.get("Alive")
            and (resource is None or float(node.get("Resources", {}).get(resource, 0)) > 0)
        ]

    def run_each(self, calls: Sequence[tuple[str, Callable[..., R], tuple[object, ...]]]) -> list[R]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        pending = [
            self.ray.remote(fn)
            .options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
                max_retries=1,
            )
            .remote(*args)
            for node, fn, args in calls
        ]
        return list(self.ray.get(pending))

    def share(self, data: bytes) -> object:
        return self.ray.put(data)


class RayOptions(TypedDict):
    """What each Ray task is started with (``ray.remote(fn).options(**options)``)."""

    num_cpus: float
    max_retries: int
    retry_exceptions: bool
    resources: NotRequired[dict[str, float]]
    memory: NotRequired[int]  # bytes


class RayExecutor:
    """``map(fn, jobs)`` on a Ray cluster; yields ``(job, result)`` as each finishes.
    ``needs``: what the environment kind asks of the nodes (a resource, a preparation)."""

    def __init__(
        self,
        address: str = "auto",
        cpus: float = 1.0,
        memory_mb: int | None = None,
        max_retries: int = 3,
        resources: dict[str, float] | None = None,
        needs: NodeNeeds | None = None,
    ) -> None:
        self.address = address
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.max_retries = max_retries
        self.resources = dict(resources or {})
        self.needs = needs or NodeNeeds()

    def options(self) -> RayOptions:
        resources = dict(self.resources)
        if self.needs.resource:
            resources.setdefault(self.needs.resource, 1)
        opts: RayOptions = {
            "num_cpus": self.cpus,
            "max_retries": self.max_retries,
            "retry_exceptions": False,
        }
        if resources:
            opts["resources"] = resources
        if self.memory_mb:
            opts["memory"] = int(self.memory_mb) * 1024 * 1024
        return opts

    def _ship(self, jobs: list[Any]) -> list[dict[str, tuple[str, str, Any]]]:
        """Each job's folders as object-store references, one per distinct content."""
        from replaykit.envs.tasks import task_digest

        ray = _ray()
        by_path: dict[str, tuple[str, str, Any]] = {}
        by_digest: dict[str, object] = {}  # Ray object references (untyped), by folder digest
        shipped = []
        for job in jobs:
            folders = {}
            for attr in getattr(job, "portable_paths", ()):
                path = str(getattr(job, attr))
                if path not in by_path:
                    digest = task_digest(Path(path))
                    if digest not in by_digest:
                        by_digest[digest] = ray.put(read_folder(Path(path)))
                    by_path[path] = (digest, Path(path).name, by_digest[digest])
                folders[attr] = by_path[path]
            shipped.append(folders)
        return shipped

    def map(self, fn: Callable[[J], R], jobs: Iterable[J], batch: bool = False) -> Iterator[tuple[J, R]]:
        """``batch``: the jobs are short (offline replays, a few ms each), so several go in
        one Ray task (``batching.batch_size``: about 8 tasks per CPU of the cluster), which
        saves Ray's per-task cost; long jobs (recording) stay one per task, so a retry or a
        driver kill loses at most one episode's work."""
        ray = _ray()
        jobs = list(jobs)
        if not jobs:
            return
        connect(self.address)
        if self.needs.prepare is not None:  # e.g. every Docker node gets the driver's base images
            self.needs.prepare(RayNodes(ray))
        shipped = list(zip(jobs, self._ship(jobs), strict=True))
        size = self._batch_size(ray, len(jobs)) if batch else 1
        remote = ray.remote(run_portable_batch).options(**self.options())
        pending = {
            remote.remote(fn, shipped[i : i + size]): [job for job, _ in shipped[i : i + size]]
            for i in range(0, len(shipped), size)
        }
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    batch_jobs = pending.pop(ref)
                    yield from zip(batch_jobs, self._get(ray, ref, batch_jobs[0]), strict=True)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def _batch_size(self, ray: Any, jobs: int) -> int:
        return batch_size(jobs, int(float(ray.cluster_resources().get("CPU", 1)) / max(self.cpus, 0.01)))

    def _get(self, ray: Any, ref: Any, job: Any) -> Any:
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except (
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.NodeDiedError,
            ray.exceptions.RayError,
        ) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ReplaykitError(
                f"a Ray task ({_label(job)}) failed after {self.max_retries} retries: {first}; rerun to resume (finished episodes are stored)"
            ) from None


def _label(job: Any) -> str:
    key = getattr(job, "key", None)
    if key is not None:
        return f"task {key.task_id} seed {key.seed}"
    return type(job).__name__


class RaySettings(ExecutorSettings):
    """The ``ray`` kind's keys."""

    address: str = Field(
        default="auto",
        description="`auto` (this node's cluster), `ray://host:10001`, `local` (a private one) or `host:port`.",
    )
    cpus: float = Field(default=1.0, gt=0, description="CPUs each episode declares.")
    memory_mb: int | None = Field(default=None, gt=0, description="Memory (MB) each episode declares.")
    max_retries: int = Field(default=3, ge=0, description="Retries of an episode whose worker or node died.")
    resources: dict[str, float] = Field(
        default_factory=dict, description="Extra custom resources each episode declares."
    )


def ray_executor(settings: RaySettings, needs: NodeNeeds) -> RayExecutor:
    """The ``ray`` executor kind (``executor: {kind: ray, address: …}``)."""
    s = settings
    return RayExecutor(s.address, s.cpus, s.memory_mb, s.max_retries, s.resources, needs)


RAY = ExecutorKind(ray_executor, RaySettings)
