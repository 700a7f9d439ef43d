"""What replaying a run hands out, typed: each episode's digests and the first divergence."""

from __future__ import annotations

from typing import TypedDict

from replaykit.core.errors import DivergenceReport


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
