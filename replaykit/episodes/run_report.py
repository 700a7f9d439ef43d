"""What ``replaykit run`` reports of each episode beyond its stored row, derived from its
recorded events and never stored: its outcome class (``cassette/outcomes.py``), the framework
limit it reached, the exception type its harness raised, its calls' facets and the facet of the
call gone wrong that ended it (``cassette/facets.py``), and why an infra episode was not graded."""

from __future__ import annotations

from replaykit.cassette.backend import RunStore
from replaykit.cassette.facets import ended_by, facet_counts
from replaykit.cassette.outcomes import stored_outcome
from replaykit.episodes.run_records import ReportedEpisode


def with_outcomes(store: RunStore, episodes: list[ReportedEpisode]) -> list[ReportedEpisode]:
    """Each episode with its ``outcome`` (derived from its cassette's events), the framework
    ``limit`` it reached, if any, and, if its harness raised, the exception type (``error``);
    its calls' facets (``call_facets``: counts) and, when a call that went wrong ended it, that
    facet (``ended_by``), derived from the recorded bytes; an infra episode why it was not graded
    (``reason``: its grade's detail, or the error)."""
    out = []
    for episode in episodes:
        facts = stored_outcome(store, episode.cassette_id)
        recorded = store.get_episode(episode.cassette_id)
        events = recorded.events
        ended = ended_by(events) if facts.outcome not in ("solved", "infra") else None
        raised = facts.error if not episode.passed and not episode.infra_failure else None
        grade = recorded.grade
        why = (grade.detail if grade is not None else "") or facts.error or "not graded"
        row = {
            **episode.to_json(),
            "call_facets": facet_counts(events),
            "ended_by": ended or "",
            "outcome": facts.outcome,
            "limit": facts.limit or "",
            "error": raised.split(":", 1)[0] if raised else "",
            "reason": why if episode.infra_failure else "",
        }
        out.append(type(episode).model_validate(row))
    return out
