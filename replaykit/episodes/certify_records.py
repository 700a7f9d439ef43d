"""The documents certification hands out: a task's certificate, its first difference, a run's report.

A certificate is stored per task and run (``StoreBackend.put_certificate``, ``doc`` as
canonical JSON); ``certify_run`` returns one ``CertifyRow`` per task.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from replaykit.core.records import JSON


class FirstDifference(TypedDict):
    """Where a re-execution parted from the recording (``network`` when it ran on a live network)."""

    field: str  # exit_code | timed_out | stdout | stderr | grade | network
    seed: int
    cassette_id: str
    position: NotRequired[int]
    step: NotRequired[int | None]
    action: NotRequired[str]
    recorded: NotRequired[JSON]
    reexecuted: NotRequired[JSON]


class CertificateEvidence(TypedDict, total=False):
    first_difference: FirstDifference | None
    cassettes: list[str]


class Certificate(TypedDict):
    """A task's certificate as ``certify_task`` returns it (``doc`` parsed)."""

    task_id: str
    env_kind: str
    image_id: str
    status: str  # deterministic | forked | error
    reason: str
    episodes: int
    doc: CertificateEvidence
    id: NotRequired[str]
    task_digest: NotRequired[str]
    run_id: NotRequired[str]
    created_at: NotRequired[str]


class CertifyRow(TypedDict):
    task_id: str
    env: str
    image: str
    status: str
    reason: str
    episodes: int
    reused: bool
    first_difference: FirstDifference | None


class CertifyReport(TypedDict):
    """``envs certify RUN``: one row per task and the counts by status."""

    run_id: str
    tasks: list[CertifyRow]
    deterministic: int
    forked: int
    error: int
    certified: bool
