"""What measuring and replaying a run hand out, typed: a measure's result (``MeasureResult``, what
``run.measure`` returns; its ``to_json()`` is ``run --json``), a run's rows as ``replaykit run``
reports them, each replayed episode's digests and the first divergence, the Harbor job written of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, NotRequired, TypedDict

from pydantic import Field

from replaykit.core.document import WhenSet
from replaykit.core.errors import DivergenceReport
from replaykit.core.meta import AgentMeta
from replaykit.core.records import JSON
from replaykit.core.run_doc import EpisodeSummary, RunDoc
from replaykit.episodes.reuse import ReusePolicy
from replaykit.models.probe import ProbeResult


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


@dataclass
class MeasureResult:
    run: RunDoc
    recorded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    engine: dict[str, JSON] | None = None  # the engine identity measured for this run (real endpoints)
    probe: ProbeResult | None = None  # the engine's probe this run consulted (made at its concurrency)
    reuse: ReusePolicy | None = None  # prefix reuse, and why (episodes/reuse.py)
    model_calls: int = 0  # requests this measure sent to the endpoint
    reused_events: int = 0  # events the episodes it recorded were served from donors instead
    agent: AgentMeta | None = None  # the named agent run as the harness, with its installed version
    reported: list[ReportedEpisode] | None = None  # its rows as ``run`` reports them (``report=True``)
    store: str = ""  # where it was stored (``measure(report=True)``)
    harbor_job: HarborExport | None = (
        None  # the Harbor job written of it (``report.harbor_jobs.measure_run``)
    )

    def rows(self) -> list[ReportedEpisode]:
        """The run's rows, each marked reused or recorded by this measure."""
        reused = set(self.reused)
        return [
            ReportedEpisode.model_validate({**e.to_json(), "reused": e.cassette_id in reused})
            for e in self.run.episodes
        ]

    def to_json(self) -> dict[str, object]:
        """``replaykit run --json``: the run document, its rows as reported (else ``rows()``), the counts."""
        rows = self.rows() if self.reported is None else self.reported
        out: dict[str, object] = {
            **self.run.to_json(),
            "episodes": [r.to_json() for r in rows],
            "recorded_count": len(self.recorded),
            "reused_count": len(self.reused),
            "model_calls": self.model_calls,
            "reused_events": self.reused_events,
        }
        if self.reuse is not None:
            out["reuse"] = self.reuse.to_dict()
        if self.engine is not None:
            out["engine"] = self.engine
        if self.agent is not None:
            out["agent"] = self.agent
        if self.probe is not None:
            probe = self.probe
            out["probe"] = {
                "probe_id": probe.get("probe_id", ""),
                "verdict": probe["verdict"],
                "concurrency": probe["concurrency"],
            }
        if self.store:
            out["store"] = self.store
        if self.harbor_job is not None:
            out["harbor_job"] = self.harbor_job
        return out
