"""The documents certification hands out: a task's certificate, its first difference, a run's report.

A certificate is stored per task and run (``cassette/certificates.py``:
``StoreBackend.put_certificate``); ``certify_run`` returns one ``CertifyRow`` per task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:  # a pydantic module: a report's reader (render) loads none
    from replaykit.cassette.certificates import FirstDifference


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
