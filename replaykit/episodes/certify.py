"""Certification: re-execute a run's recorded actions for real and classify each task.

For every episode of a run, the recorded environment actions are run again, in
order, in a fresh environment of the recorded kind (the Docker image in the
cassette key, or the local workspace path the rollout uses); no model is needed,
the actions are in the cassette. Observations (stdout, stderr, exit code, timeout)
are compared after narrow scrubbing (hex addresses, UUIDs, timestamps, durations)
and so is the grade (reward, passed, infra failure). A task is ``deterministic``
when every episode matches, else ``forked`` with its first differing step. Re-executing
one task is ``reexecute.py`` (``check_task``, ``CertifyJob``, the statuses); this module keys, stores and reuses certificates and fans a run's tasks out.

Certificates live in the store's ``certificates`` table, keyed by what was executed:
(task digest, environment kind, the image's recipe, and the digests of the task's episodes
in the run — their actions, observations and grade). Each task folder is found by its id and
content digest (``task_source.py``: the store's own copy, ``--config``'s panel, ``--tasks``). A certificate is only reused for
the very episodes it re-executed: a run with other actions on the same task is
certified on its own, and one run's verdict never flips another's.
``certificate_lookup.forked_certificates(store, run_doc)`` is what training verdicts call to exclude tasks
(and name the certificates they excluded them by); it reads certificates by the same key.

An episode its env kind says can never be deterministic (the docker kind: it ran on a
live network, ``env.network: live``) is ``forked`` with the kind's reason (``network
unfrozen``) without re-executing anything. An episode with recorded exchanges is
re-executed behind what its kind serves of them only (``episodes/network.py``'s
``serving``; docker: the frozen network's proxy); a request never recorded is an error
naming the URL.
"""

from __future__ import annotations

from pathlib import Path

from replaykit.cassette.backend import EpisodeStore, RunStore
from replaykit.cassette.certificates import Certificate, CertificateEvidence
from replaykit.cassette.events import Episode
from replaykit.cassette.keys import CassetteKey
from replaykit.cassette.store.schema import now_iso
from replaykit.core.errors import TaskError
from replaykit.core.progress import Progress
from replaykit.envs.tasks import Task
from replaykit.episodes.certificate_lookup import (
    DETERMINISTIC,
    ERROR,
    FORKED,
    by_task,
    cert_id_of,
    env_kind,
    get_certificate,
    key_of,
)
from replaykit.episodes.certify_records import CertifyReport, CertifyRow
from replaykit.episodes.network import serving
from replaykit.episodes.reexecute import CertifyJob, Check, certify_job, check_task
from replaykit.episodes.task_source import TaskSources
from replaykit.execution.settings import Executor

__all__ = ["certify_run", "certify_task"]


def certify_task(
    store: RunStore, run_id: str, episodes: list[Episode], task: Task, check: Check | None = None
) -> Certificate:
    """Re-execute every episode of one task (unless ``check`` is its outcome); store and return its certificate."""
    key = episodes[0].key
    image = dict(key.extra).get("image", "")
    if check is None:
        with serving(store, episodes) as served:
            check = check_task(episodes, task, served)
    status, reason, first = check
    evidence: CertificateEvidence = {"first_difference": first, "cassettes": [e.id for e in episodes]}
    cert = Certificate(
        id=cert_id_of(store, [e.id for e in episodes]),
        task_id=task.id,
        task_digest=key.task_digest,
        env_kind=env_kind(key),
        image_id=image,
        status=status,
        reason=reason,
        run_id=run_id,
        episodes=len(episodes),
        doc=evidence,
        created_at=now_iso(),
    )
    if status != ERROR:  # an infrastructure error certifies nothing
        store.put_certificate(cert)
    return cert


def certify_run(
    store: RunStore,
    run_id: str,
    tasks: list[str] | None = None,
    root: Path | None = None,
    refresh: bool = False,
    progress: Progress | None = None,
    executor: Executor | None = None,
    sources: TaskSources | None = None,
) -> CertifyReport:
    """Certify every task of a run (reusing certificates unless ``refresh``); the
    re-executions fan out on ``executor`` (default: inline), the driver writes. Each task is
    found by its id and content digest (``task_source.py``: the store's copy, then ``sources``,
    else the ``tasks`` patterns under ``root``)."""
    run = store.get_run(run_id)
    if sources is None:
        sources = TaskSources(store, (tuple(tasks), Path(root or ".")) if tasks else None)
    tasks_of = by_task(store, run.cassettes)
    if progress:
        progress("plan", {"total": len(tasks_of)})
    certs, todo = _plan(store, run.run_id, tasks_of, refresh, sources)

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
        with serving(store, everything) as served:
            jobs = [
                CertifyJob(episodes, str(task.path), {e.id: served[e.id] for e in episodes})
                for episodes, task in todo.values()
            ]
            for job, check in executor.map(certify_job, jobs):
                finished(job.episodes[0].key.task_id, check)
    rows = [_row(task_id, *certs[task_id]) for task_id in sorted(tasks_of)]
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in (DETERMINISTIC, FORKED, ERROR)}
    return {
        "run_id": run.run_id,
        "tasks": rows,
        "deterministic": counts[DETERMINISTIC],
        "forked": counts[FORKED],
        "error": counts[ERROR],
        "certified": counts[ERROR] == 0,
    }


def _plan(
    store: RunStore, run_id: str, tasks_of: dict[str, list[str]], refresh: bool, sources: TaskSources
) -> tuple[dict[str, tuple[Certificate, bool]], dict[str, tuple[list[Episode], Task]]]:
    """Each task's stored certificate (reused), else its episodes and folder to re-execute (a
    folder not found: an error certificate, never stored)."""
    certs: dict[str, tuple[Certificate, bool]] = {}
    todo: dict[str, tuple[list[Episode], Task]] = {}
    for task_id, cassette_ids in sorted(tasks_of.items()):
        key = key_of(store, cassette_ids[0])
        cert = None if refresh else get_certificate(store, cert_id_of(store, cassette_ids))
        if cert is not None:
            certs[task_id] = (cert, True)
            continue
        episodes = [store.get_episode(c) for c in cassette_ids]
        try:
            todo[task_id] = (episodes, sources.find(task_id, key.task_digest))
        except TaskError as exc:  # an error certifies nothing: never stored
            certs[task_id] = (_unfound(store, run_id, task_id, cassette_ids, key, exc), False)
    return certs, todo


def _unfound(
    store: EpisodeStore, run_id: str, task_id: str, cassette_ids: list[str], key: CassetteKey, exc: TaskError
) -> Certificate:
    """The error certificate of a task whose folder is not found (or not the one recorded)."""
    return Certificate(
        id=cert_id_of(store, cassette_ids),
        task_id=task_id,
        task_digest=key.task_digest,
        env_kind=env_kind(key),
        image_id=dict(key.extra).get("image", ""),
        status=ERROR,
        reason=str(exc),
        run_id=run_id,
        episodes=len(cassette_ids),
        doc={},
        created_at=now_iso(),
    )


def _row(task_id: str, cert: Certificate, reused: bool) -> CertifyRow:
    """A task's row of the certify report."""
    return {
        "task_id": task_id,
        "env": cert.env_kind,
        "image": cert.image_id,
        "status": cert.status,
        "reason": cert.reason,
        "episodes": cert.episodes,
        "reused": reused,
        "first_difference": cert.doc.get("first_difference"),
    }
