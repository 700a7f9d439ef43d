"""What measuring and replaying a run hand out, typed: a run's rows as ``replaykit run`` reports
them, each replayed episode's digests and the first divergence, the Harbor job written of it."""

from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict

from pydantic import Field

from replaykit.core.document import WhenSet
from replaykit.core.errors import DivergenceReport
from replaykit.core.run_doc import EpisodeSummary


class ReplayedEpisode(TypedDict):
    cassette_id: str
    task_id: str
    seed: int
    identical: bool
    recorded_digest: str
    replayed_digest: str | None


class ReplayReport(TypedDict):
    """``replay RUN``: every episode replayed offline against one harness tree."""

    run_id: str
    harness_sha: str
    replayed_harness_sha: str
    identical: bool
    episodes: list[ReplayedEpisode]
    divergence: DivergenceReport | None  # the first one
    divergences: int
    of: NotRequired[str]  # "cassette": one cassette replayed (``run_id`` is its id), not a run
    claims_checked: NotRequired[int]  # reuse claims checked against their donors' events
    claims_unchecked: NotRequired[list[str]]  # cassettes whose claimed donor is not in the store
    agent_note: NotRequired[str]  # episodes recorded under another version of their named agent


class HarborExport(TypedDict):
    """A run written as Harbor's job folder (``report.harbor_jobs.export_harbor_jobs``; ``run
    --jobs-dir``'s ``harbor_job``, ``cassettes export --format harbor --json``)."""

    job_dir: str
    trials: int
    errors: int
    pass_at_k: dict[str, float]
    metrics: list[dict[str, float]]


class ReportedEpisode(EpisodeSummary):
    """A run's row as ``replaykit run`` reports it: the stored row, and what this invocation did
    with it (never stored)."""

    reused: bool = Field(default=False, description="Its cassette was reused, not recorded.")
    outcome: Annotated[str, WhenSet] = Field(
        default="", description="Its class, derived from its events (episodes/outcomes.py)."
    )
    limit: Annotated[str, WhenSet] = Field(default="", description="The framework limit it reached.")
    error: Annotated[str, WhenSet] = Field(default="", description="The exception type its harness raised.")
    call_facets: dict[str, int] = Field(
        default_factory=dict, description="Its calls by facet (cassette/facets.py)."
    )
    reason: Annotated[str, WhenSet] = Field(
        default="", description="Why an infra episode was not graded (its grade's detail, or the error)."
    )
    ended_by: Annotated[str, WhenSet] = Field(
        default="", description="The facet of the call gone wrong that ended it."
    )
