"""Certification: re-execute a run's recorded actions for real and classify each task.

For every episode of a run, the recorded environment actions are run again, in
order, in a fresh environment of the recorded kind (the Docker image in the
cassette key, or the local workspace path the rollout uses); no model is needed,
the actions are in the cassette. Observations (stdout, stderr, exit code, timeout)
are compared after narrow scrubbing (hex addresses, UUIDs, timestamps, durations)
and so is the grade (reward, passed, infra failure). A task is ``deterministic``
when every episode matches, else ``forked`` with its first differing step.

Certificates live in the store's ``certificates`` table, keyed by what was executed:
(task digest, environment kind, image ID, and the digests of the task's episodes in
the run — their actions, observations and grade). A certificate is only reused for
the very episodes it re-executed: a run with other actions on the same task is
certified on its own, and one run's verdict never flips another's.
``forked_tasks(store, run_doc)`` is what training verdicts call to exclude tasks;
it reads certificates by the same key.

An episode whose environment metadata says ``"network": "unfrozen"`` (a Docker task on a
live network: ``env.network: live``, or recorded without the frozen network) is never
certified deterministic: its task is ``forked`` with the reason ``network unfrozen``
without re-executing anything. A ``frozen`` episode is re-executed behind a proxy that
serves only its recorded exchanges (``episodes/network.py``); a request it never
recorded is an error naming the URL.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, ClassVar, Iterator

from replaykit.envs.base import EnvTable
from replaykit.envs.network import NetworkRequest
from replaykit.core.records import JSON, EpisodeMeta, RunDocument
from replaykit.episodes.certify_records import (
    Certificate,
    CertificateEvidence,
    CertifyReport,
    CertifyRow,
    FirstDifference,
)
from replaykit.cassette.events import EnvEvent, Episode, GradeEvent
from replaykit.cassette.keys import CassetteKey
from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.store.schema import CertificateRow, now_iso
from replaykit.core.determinism import canonical_json, digest_of
from replaykit.envs.registry import make_env
from replaykit.episodes import network
from replaykit.envs.tasks import Task, load_panel, load_task
from replaykit.core.errors import ReplaykitError, TaskError
from replaykit.execution.executor import Executor
from replaykit.core.progress import Progress
from replaykit.episodes.observation_scrub import scrub

DETERMINISTIC, FORKED, ERROR = "deterministic", "forked", "error"
#: The environment metadata's ``network`` value of an episode that ran on a live network.
NETWORK_UNFROZEN = "unfrozen"


def env_kind(key: CassetteKey) -> str:
    return dict(key.extra).get("env", "local")


def certificate_id(
    task_digest: str, kind: str, image_id: str, executed: list[str] | tuple[str, ...] = ()
) -> str:
    """``executed``: the digests of the episodes re-executed (order does not matter)."""
    return digest_of(
        {"task_digest": task_digest, "env": kind, "image": image_id, "executed": sorted(executed)}
    )[:24]


def _key_of(store: StoreBackend, cassette_id: str) -> CassetteKey:
    return CassetteKey.from_canonical(json.loads(store.cassette_row(cassette_id)["key_json"]))


def _cert_id_of(store: StoreBackend, cassette_ids: list[str]) -> str:
    """A task's certificate in one run: keyed by the episodes (their digests cover every
    action, observation and the grade), never by the task alone."""
    key = _key_of(store, cassette_ids[0])
    digests = [str(store.cassette_row(c)["digest"]) for c in cassette_ids]
    return certificate_id(key.task_digest, env_kind(key), dict(key.extra).get("image", ""), digests)


def _by_task(store: StoreBackend, cassette_ids: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for cassette_id in cassette_ids:
        out.setdefault(_key_of(store, cassette_id).task_id, []).append(cassette_id)
    return out


def get_certificate(store: StoreBackend, cert_id: str) -> Certificate | None:
    return cast(Certificate | None, store.get_certificate(cert_id))  # as certify_task stored it


def forked_tasks(store: StoreBackend, run_doc: RunDocument) -> dict[str, str]:
    """Task id → reason, for the run's tasks whose certificate says ``forked``.

    Pure look-up (runs nothing): tasks never certified are absent; certify them
    first with :func:`certify_run`. Training verdicts exclude these tasks.
    """
    out: dict[str, str] = {}
    cassettes = run_doc.get("cassettes") or [e["cassette_id"] for e in run_doc.get("episodes", [])]
    for task_id, cassette_ids in _by_task(store, cassettes).items():
        cert = get_certificate(store, _cert_id_of(store, cassette_ids))
        if cert is not None and cert["status"] == FORKED:
            out[task_id] = cert["reason"]
    return out


@dataclass
class _Difference:
    position: int
    step: int | None
    field: str
    action: str
    recorded: JSON
    reexecuted: JSON

    def to_dict(self, seed: int, cassette_id: str) -> FirstDifference:
        return {
            "position": self.position,
            "step": self.step,
            "field": self.field,
            "action": self.action,
            "recorded": self.recorded,
            "reexecuted": self.reexecuted,
            "seed": seed,
            "cassette_id": cassette_id,
        }

    def reason(self, seed: int) -> str:
        where = (
            f"step {self.step} (event {self.position})"
            if self.step is not None
            else f"the grade (event {self.position})"
        )
        rec, new = json.dumps(self.recorded)[:120], json.dumps(self.reexecuted)[:120]
        return f"seed {seed}: {self.field} differs at {where} `{self.action[:80]}`: recorded {rec}, re-executed {new}"


def _find_task(task_id: str, digest: str, meta: EpisodeMeta, patterns: list[str] | None, root: Path) -> Task:
    recorded = meta.get("task")
    path = recorded.get("path") if recorded else None
    candidates: list[Task] = []
    if path and Path(path).is_dir():
        candidates.append(load_task(path))
    searches = [(patterns, root)] if patterns else [(["envs/*"], root)]
    for pats, base in searches:
        try:
            candidates.extend(t for t in load_panel(pats, base) if t.id == task_id)
        except TaskError:
            continue
    for task in candidates:
        if task.digest == digest:
            return task
    if candidates:
        raise TaskError(
            f"task {task_id!r} changed since it was recorded (digest {candidates[0].digest[:12]}, recorded {digest[:12]}); re-record it"
        )
    raise TaskError(
        f"task {task_id!r} not found under {', '.join(p for ps, _ in searches for p in ps)}; pass --tasks PATH"
    )


def _rerun(episode: Episode, task: Task, net: NetworkRequest | None = None) -> _Difference | None:
    """Run the episode's recorded actions in a fresh environment; the first difference."""
    from replaykit.episodes.rollout import EpisodeSpec, TaskView

    meta = episode.meta
    env_cfg = cast(EnvTable, dict(meta.get("env") or {"kind": env_kind(episode.key)}))  # as recorded
    spec = EpisodeSpec(
        key=episode.key,
        task_path=str(task.path),
        task=TaskView.of(task),
        tree_dir="",
        entry="",
        params={},
        temperature=0.0,
        base_url="",
        api_key="",
        env=env_cfg,
        network=net.copy() if net else NetworkRequest(),
    )
    env = make_env(spec)
    misses: Any = getattr(env, "network_misses", list)

    def served() -> None:  # the frozen network had no recording for a request: say which
        missed = misses()
        if missed:
            raise ReplaykitError(network.unrecorded_line(missed))

    step = 0
    # multi-step tasks: stage each step before its first action, grade it after its last
    bounds = list(recorded.get("step_actions") or []) if (recorded := meta.get("task")) else []
    plan: list[tuple[str, int]] = [
        p for i, n in enumerate(bounds) for p in [("begin", i)] + [("act", i)] * n + [("grade", i)]
    ]
    graded: list[tuple[Any, Any]] = []
    stepped: Any = env  # environments that run multi-step tasks have begin_step (local, docker)

    def advance(to_action: bool) -> None:
        """Run staged/grade points until the next recorded action (or to the end)."""
        while plan and not (to_action and plan[0][0] == "act"):
            what, i = plan.pop(0)
            if what == "begin":
                stepped.begin_step(task.steps[i])
            elif what == "grade":
                graded.append((task.steps[i], env.grade()))
        if to_action and plan:
            plan.pop(0)

    try:
        env.start()
        for position, event in enumerate(episode.events):
            if bounds and isinstance(event, EnvEvent):
                advance(to_action=True)
            if isinstance(event, EnvEvent):
                obs = env.run(event.action)
                served()
                rec = event.observation
                for field in ("exit_code", "timed_out", "stdout", "stderr"):
                    a, b = getattr(rec, field), getattr(obs, field)
                    if isinstance(a, str):
                        a, b = scrub(a), scrub(b)
                    if a != b:
                        return _Difference(
                            position, step, field, event.action, getattr(rec, field), getattr(obs, field)
                        )
                step += 1
            elif isinstance(event, GradeEvent):
                if bounds:
                    from replaykit.envs.steps import combine

                    advance(to_action=False)
                    grade = combine(graded, task.reward_strategy, len(task.steps))
                else:
                    grade = env.grade()
                served()
                rec_g = {
                    "reward": event.grade.reward,
                    "passed": event.grade.passed,
                    "infra_failure": event.grade.infra_failure,
                }
                new_g = {"reward": grade.reward, "passed": grade.passed, "infra_failure": grade.infra_failure}
                if rec_g != new_g:
                    return _Difference(position, None, "grade", "tests/test.sh", rec_g, new_g)
    finally:
        env.close()
    return None


Check = tuple[str, str, FirstDifference | None]  # status, reason, first difference


def network_unfrozen(episode: Episode) -> bool:
    """The episode ran on a live network (its environment said ``network: unfrozen``)."""
    environment = episode.meta.get("environment")
    return isinstance(environment, dict) and environment.get("network") == NETWORK_UNFROZEN


def check_task(episodes: list[Episode], task: Task, nets: dict[str, NetworkRequest] | None = None) -> Check:
    """Re-execute every episode of one task: deterministic, forked (with the first
    difference; ``network unfrozen`` when an episode ran on a live network: its
    observations depend on what was served that day) or error. ``nets``: each episode's
    frozen network (``episodes/network.py``). Writes nothing, so it can run on any worker."""
    status, reason = DETERMINISTIC, ""
    first: FirstDifference | None = None
    for episode in episodes:
        if network_unfrozen(episode):
            reason = (
                f"seed {episode.key.seed}: network unfrozen: the episode ran with a live network "
                f"(not the frozen one), so its observations cannot be certified deterministic; "
                f"re-record it with env.network: frozen"
            )
            return FORKED, reason, {"field": "network", "seed": episode.key.seed, "cassette_id": episode.id}
    try:
        for episode in episodes:
            diff = _rerun(episode, task, (nets or {}).get(episode.id))
            if diff is not None:
                status, reason, first = (
                    FORKED,
                    diff.reason(episode.key.seed),
                    diff.to_dict(episode.key.seed, episode.id),
                )
                break
    except ReplaykitError as exc:
        status, reason = ERROR, str(exc)
    return status, reason, first


@dataclass
class CertifyJob:
    """One task's episodes to re-execute (picklable; the task folder travels by content)."""

    episodes: list[Episode]
    task_path: str
    nets: dict[str, NetworkRequest] | None = None

    portable_paths: ClassVar[tuple[str, ...]] = ("task_path",)


def certify_job(job: CertifyJob) -> Check:
    return check_task(job.episodes, load_task(job.task_path), job.nets)


def certify_task(
    store: StoreBackend, run_id: str, episodes: list[Episode], task: Task, check: Check | None = None
) -> Certificate:
    """Re-execute every episode of one task (unless ``check`` is its outcome); store and return its certificate."""
    key = episodes[0].key
    image = dict(key.extra).get("image", "")
    if check is None:
        with served_networks(store, episodes) as nets:
            check = check_task(episodes, task, nets)
    status, reason, first = check
    evidence: CertificateEvidence = {"first_difference": first, "cassettes": [e.id for e in episodes]}
    row: CertificateRow = {
        "id": _cert_id_of(store, [e.id for e in episodes]),
        "task_id": task.id,
        "task_digest": key.task_digest,
        "env_kind": env_kind(key),
        "image_id": image,
        "status": status,
        "reason": reason,
        "run_id": run_id,
        "episodes": len(episodes),
        "doc": canonical_json(evidence),
        "created_at": now_iso(),
    }
    if status != ERROR:  # an infrastructure error certifies nothing
        store.put_certificate(row)
    return {**row, "doc": evidence}


def certify_run(
    store: StoreBackend,
    run_id: str,
    tasks: list[str] | None = None,
    root: Path | None = None,
    refresh: bool = False,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> CertifyReport:
    """Certify every task of a run (reusing certificates unless ``refresh``); the
    re-executions fan out on ``executor`` (default: inline), the driver writes."""
    run = store.get_run(run_id)
    root = Path(root or Path.cwd())
    by_task = _by_task(store, run.cassettes)
    if progress:
        progress("plan", {"total": len(by_task)})
    certs: dict[str, tuple[Certificate, bool]] = {}
    todo: dict[str, tuple[list[Episode], Task]] = {}
    for task_id, cassette_ids in sorted(by_task.items()):
        key = _key_of(store, cassette_ids[0])
        cert = None if refresh else get_certificate(store, _cert_id_of(store, cassette_ids))
        if cert is not None:
            certs[task_id] = (cert, True)
            continue
        episodes = [store.get_episode(c) for c in cassette_ids]
        try:
            todo[task_id] = (episodes, _find_task(task_id, key.task_digest, episodes[0].meta, tasks, root))
        except TaskError as exc:
            certs[task_id] = (
                {
                    "task_id": task_id,
                    "env_kind": env_kind(key),
                    "image_id": dict(key.extra).get("image", ""),
                    "status": ERROR,
                    "reason": str(exc),
                    "episodes": len(episodes),
                    "doc": {},
                },
                False,
            )

    def finished(task_id: str, check: Check | None) -> None:
        episodes, task = todo[task_id]
        certs[task_id] = (certify_task(store, run.run_id, episodes, task, check), False)
        if progress:
            progress("task", {"task_id": task_id})

    if executor is None:
        for task_id in todo:
            finished(task_id, None)
    else:
        everything = [e for episodes, _ in todo.values() for e in episodes]
        with served_networks(store, everything) as nets:
            jobs = [
                CertifyJob(episodes, str(task.path), {e.id: nets[e.id] for e in episodes})
                for episodes, task in todo.values()
            ]
            for job, check in executor.map(certify_job, jobs):
                finished(job.episodes[0].key.task_id, check)
    rows: list[CertifyRow] = []
    for task_id in sorted(by_task):
        cert, reused = certs[task_id]
        rows.append(
            {
                "task_id": task_id,
                "env": cert["env_kind"],
                "image": cert["image_id"],
                "status": cert["status"],
                "reason": cert["reason"],
                "episodes": cert["episodes"],
                "reused": reused,
                "first_difference": (cert.get("doc") or {}).get("first_difference"),
            }
        )
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in (DETERMINISTIC, FORKED, ERROR)}
    return {
        "run_id": run.run_id,
        "tasks": rows,
        "deterministic": counts[DETERMINISTIC],
        "forked": counts[FORKED],
        "error": counts[ERROR],
        "certified": counts[ERROR] == 0,
    }


@contextlib.contextmanager
def served_networks(store: StoreBackend, episodes: list[Episode]) -> Iterator[dict[str, NetworkRequest]]:
    """Each episode's frozen network for a re-execution (its recorded exchanges only), removed after."""
    nets: dict[str, NetworkRequest] = {}
    folders = []
    try:
        for episode in episodes:
            nets[episode.id], folder = network.replay_request(store, episode)
            if folder is not None:
                folders.append(folder)
        yield nets
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
