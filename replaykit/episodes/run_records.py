"""What replaying a run hands out, typed: each episode's digests and the first divergence."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

from replaykit.core.errors import DivergenceReport
from replaykit.core.meta import AgentMeta
from replaykit.core.records import JSON, RunDocument

if TYPE_CHECKING:
    from replaykit.episodes.reuse import ReuseDoc


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


class MeasureReport(RunDocument):
    """``replaykit run``: the run document (each episode marked ``reused`` or not) and the counts."""

    engine: NotRequired[dict[str, JSON]]  # the engine identity measured for this run
    agent: NotRequired[AgentMeta]  # the named agent run as the harness (``harness.agent``)
    probe: NotRequired[
        dict[str, JSON]
    ]  # the probe of that engine it consulted: probe_id, verdict, concurrency
    reuse_basis: NotRequired[str]  # some episode was served a donor's events: exact | shared sample
    recorded_count: int
    reused_count: int
    model_calls: int  # requests this measure sent to the endpoint
    reused_events: int  # events the episodes it recorded were served from donors instead
    reuse: NotRequired[ReuseDoc]  # this measure's reuse policy and why
    store: NotRequired[str]  # where it was stored (``run`` adds it)
