"""A task's certificate, declared once: what certification stores per task and run (the
``certificates`` table, ``doc`` holding the evidence) and hands back (``certify_task``,
``get_certificate``)."""

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
    """A task's certificate: a ``certificates`` row, its ``doc`` (the evidence) decoded; the store
    writes ``doc`` as canonical JSON (``put_certificate``) and decodes it on read."""

    id: str
    task_id: str
    task_digest: str
    env_kind: str
    image_id: str
    status: str  # deterministic | forked | error
    reason: str
    run_id: str
    episodes: int
    doc: CertificateEvidence
    created_at: str
