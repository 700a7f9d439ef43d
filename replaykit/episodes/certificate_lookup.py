"""Certificates looked up, never made: which certificate covers a run's episodes of a task,
and what it says. Nothing here runs an environment (``certify.py`` re-executes and stores;
``reexecute.py`` checks one task), so a listing, a verdict's exclusions or a run's replicate
statistics read certificates without loading the rollout.

A certificate is keyed by what was executed (task digest, environment kind, image ID, and the
digests of the task's episodes in the run), so it covers only the very episodes it re-executed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from replaykit.cassette.keys import CassetteKey
from replaykit.core.determinism import digest_of

if TYPE_CHECKING:
    from replaykit.cassette.backend import DocumentStore, EpisodeStore, RunStore
    from replaykit.cassette.certificates import Certificate
    from replaykit.core.run_doc import RunDoc
    from replaykit.core.run_rows import Replicates

#: a task's certification status
DETERMINISTIC, FORKED, ERROR = "deterministic", "forked", "error"


def env_kind(key: CassetteKey) -> str:
    return dict(key.extra).get("env", "local")


def certificate_id(
    task_digest: str, kind: str, image_id: str, executed: list[str] | tuple[str, ...] = ()
) -> str:
    """``executed``: the digests of the episodes re-executed (order does not matter)."""
    return digest_of(
        {"task_digest": task_digest, "env": kind, "image": image_id, "executed": sorted(executed)}
    )[:24]


def key_of(store: EpisodeStore, cassette_id: str) -> CassetteKey:
    return CassetteKey.from_canonical(json.loads(store.cassette_row(cassette_id)["key_json"]))


def cert_id_of(store: EpisodeStore, cassette_ids: list[str]) -> str:
    """A task's certificate in one run: keyed by the episodes (their digests cover every
    action, observation and the grade), never by the task alone."""
    key = key_of(store, cassette_ids[0])
    digests = [str(store.cassette_row(c)["digest"]) for c in cassette_ids]
    return certificate_id(key.task_digest, env_kind(key), dict(key.extra).get("image", ""), digests)


def by_task(store: EpisodeStore, cassette_ids: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for cassette_id in cassette_ids:
        out.setdefault(key_of(store, cassette_id).task_id, []).append(cassette_id)
    return out


def get_certificate(store: DocumentStore, cert_id: str) -> Certificate | None:
    return store.get_certificate(cert_id)


def forked_certificates(store: RunStore, run_doc: RunDoc) -> dict[str, tuple[str, str]]:
    """Task id → (certificate id, reason), for the run's tasks certified ``forked``.

    Pure look-up (runs nothing): tasks never certified are absent; certify them first with
    ``certify.certify_run``. A training verdict excludes these tasks and names the certificates
    (their ids cover the task's episodes in this run, so a certificate of other episodes
    never applies)."""
    out: dict[str, tuple[str, str]] = {}
    cassettes = run_doc.cassettes or [e.cassette_id for e in run_doc.episodes]
    for task_id, cassette_ids in by_task(store, cassettes).items():
        cert_id = cert_id_of(store, cassette_ids)
        cert = get_certificate(store, cert_id)
        if cert is not None and cert.status == FORKED:
            out[task_id] = (cert_id, cert.reason)
    return out


def forked_tasks(store: RunStore, run_doc: RunDoc) -> dict[str, str]:
    """Task id → reason, for the run's tasks whose certificate says ``forked``."""
    return {task: reason for task, (_, reason) in forked_certificates(store, run_doc).items()}


def task_certificates(store: RunStore, run_doc: Replicates) -> dict[str, tuple[str, str]]:
    """Task id → (status, reason) of the certificate of the run's episodes of that task, for
    the tasks certified (a look-up by the certificate key; runs nothing)."""
    out: dict[str, tuple[str, str]] = {}
    cassettes = list(run_doc.cassettes) or [e.cassette_id for e in run_doc.episodes]
    for task_id, cassette_ids in by_task(store, cassettes).items():
        cert = get_certificate(store, cert_id_of(store, cassette_ids))
        if cert is not None:
            out[task_id] = (cert.status, cert.reason)
    return out


def task_certificate_id(store: EpisodeStore, run_doc: RunDoc, task_id: str) -> str | None:
    """The id a certificate of ``task_id``'s episodes in this run has (None: no such task)."""
    cassettes = run_doc.cassettes or [e.cassette_id for e in run_doc.episodes]
    found = by_task(store, cassettes).get(task_id)
    return cert_id_of(store, found) if found else None
