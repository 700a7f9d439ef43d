"""Every episode's failure class, derived from its events (never read from a stored field).

``outcome_of(events)`` is one of :data:`OUTCOMES`, decided in this order:

- ``infra``: no grade, or the grade is an infrastructure failure (endpoint, environment);
- ``verify_timeout``: the verifier itself timed out (an infrastructure failure of its own kind);
- ``solved``: the verifier passed it (even if a limit was reached first);
- ``hit_step_cap`` / ``hit_timeout``: a framework limit refused a call (``limits.max_steps`` or
  ``limits.max_tokens``; ``limits.episode_timeout_s``; see ``limits.py``);
- ``crash``: the harness raised;
- ``no_valid_action``: the harness ended without one environment action;
- ``verified_rejected``: it acted, and the verifier said no.

Episodes recorded before outcomes existed get theirs from the same events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from replaykit.cassette.backend import RunStore
from replaykit.cassette.documents import EpisodeDoc
from replaykit.cassette.events import EnvEvent, ErrorEvent, Event, GradeEvent
from replaykit.envs.base import Grade
from replaykit.episodes.limits import limit_of

OUTCOMES = (
    "solved",
    "verified_rejected",
    "hit_step_cap",
    "hit_timeout",
    "verify_timeout",
    "no_valid_action",
    "crash",
    "infra",
)
#: what the verifier's grade detail starts with when the verifier timed out (``envs.grading``)
VERIFIER_TIMEOUT = "verifier timed out"


@dataclass(frozen=True)
class EpisodeOutcome:
    """An episode's class, the limit it reached (``max_steps``, …) and the first error its
    harness raised (``Type: message``; None for none, or when the error is a limit's)."""

    outcome: str
    limit: str | None = None
    error: str | None = None


def outcome_of(events: Sequence[Event]) -> str:
    """The episode's outcome class (see the module doc)."""
    return classify(events).outcome


def classify(events: Sequence[Event]) -> EpisodeOutcome:
    grade = next((e.grade for e in reversed(events) if isinstance(e, GradeEvent)), None)
    errors = [e.message for e in events if isinstance(e, ErrorEvent)]
    return _classify(grade, errors, any(isinstance(e, EnvEvent) for e in events))


def classify_doc(doc: EpisodeDoc) -> EpisodeOutcome:
    """The same, from a stored episode document (its error and grade events are inline:
    nothing but the document is read)."""
    events = doc["events"]
    grades = [e["grade"] for e in events if e["kind"] == "grade"]
    errors = [e["message"] for e in events if e["kind"] == "error"]
    grade = Grade.from_dict(grades[-1]) if grades else None
    return _classify(grade, errors, any(e["kind"] == "env" for e in events))


def _classify(grade: Grade | None, errors: list[str], acted: bool) -> EpisodeOutcome:
    limit = next((name for m in errors if (name := limit_of(m))), None)
    error = next((m for m in errors if not limit_of(m)), None)
    if grade is None:
        outcome = "infra"
    elif grade.infra_failure:
        outcome = "verify_timeout" if grade.detail.startswith(VERIFIER_TIMEOUT) else "infra"
    elif grade.passed:
        outcome = "solved"
    elif limit is not None:
        outcome = "hit_timeout" if limit == "episode_timeout_s" else "hit_step_cap"
    elif error is not None:
        outcome = "crash"
    else:
        outcome = "verified_rejected" if acted else "no_valid_action"
    return EpisodeOutcome(outcome, limit, error)


def stored_outcome(store: RunStore, cassette_id: str) -> EpisodeOutcome:
    """A stored episode's outcome, from its document (verified by its content address)."""
    try:
        return classify_doc(store.get_json(store.cassette_row(cassette_id)["doc"]))
    except (KeyError, TypeError, ValueError, AttributeError):  # not a document's shape: say how, decoding it
        return classify(store.get_episode(cassette_id).events)
