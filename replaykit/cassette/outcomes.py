"""Every episode's outcome class: written once where the verifier's result is known, checked
on every read against the events it follows from.

``classify(events)`` is one of :data:`OUTCOMES`, from typed fields only, in this order:

- ``infra``: no grade, or the grade is an infrastructure failure (endpoint, environment);
- ``verify_timeout``: the verifier itself ran out of time (``Grade.timed_out``);
- ``solved``: the verifier passed it (even if a limit was reached first);
- ``hit_step_cap`` / ``hit_timeout``: the framework refused a call past a limit: a ``limit``
  event (``max_steps`` or ``max_tokens``; ``episode_timeout_s``), which only the rollout writes;
- ``crash``: the harness raised (an ``error`` event, whatever its exception was called);
- ``no_valid_action``: the harness ended without one environment action;
- ``verified_rejected``: it acted, and the verifier said no.

The rollout keeps the class in the episode's ``meta["outcome"]`` (``core.meta.OutcomeMeta``) with the
limits it ran under (``meta["limits"]``); :func:`outcome_problems` holds both to the events on
every read of the cassette (``Store.get_episode``: replay, ``cassettes verify``, listings):
the class must follow from them, no more actions than ``max_steps``, no call made once the
tokens were past ``max_tokens``, each limit event naming the limit in force.

Episodes recorded before (no ``meta["outcome"]``: the shipped format-1 bundles) get theirs as
they always did (``legacy``): a limit from an ``error`` event whose message starts
:data:`LEGACY_LIMIT_PREFIX`, a verifier timeout from its grade's detail.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replaykit.core.meta import LIMIT_NAMES, OutcomeMeta
from replaykit.envs.results import Grade

if TYPE_CHECKING:  # a listing classifies documents: the event classes are loaded for episodes
    from replaykit.cassette.backend import RunStore
    from replaykit.cassette.events import Episode, Event, LimitEvent

#: every outcome class an episode can have
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
#: how an ``error`` event recorded a limit before limits had events of their own
LEGACY_LIMIT_PREFIX = "limit reached: limits."
#: what a grade's detail started with when the verifier timed out, before ``Grade.timed_out``
LEGACY_VERIFIER_TIMEOUT = "verifier timed out"


@dataclass(frozen=True)
class EpisodeOutcome:
    """An episode's class, the limit it reached (``max_steps``, …) and the first error its
    harness raised (``Type: message``; None for none)."""

    outcome: str
    limit: str | None = None
    error: str | None = None

    def to_doc(self) -> OutcomeMeta:
        doc = OutcomeMeta(outcome=self.outcome)
        if self.limit is not None:
            doc["limit"] = self.limit
        return doc


def legacy_limit(message: str) -> str | None:
    """The limit an old recording's ``error`` event named (``max_steps``, …), else None."""
    if not message.startswith(LEGACY_LIMIT_PREFIX):
        return None
    name = message[len(LEGACY_LIMIT_PREFIX) :].split("=", 1)[0]
    return name if name in LIMIT_NAMES else None


def classify(events: Sequence[Event], legacy: bool = False) -> EpisodeOutcome:
    """The class the events give (``legacy``: an episode recorded before outcomes were kept)."""
    from replaykit.cassette.events import EnvEvent, ErrorEvent, GradeEvent, LimitEvent

    grade = next((e.grade for e in reversed(events) if isinstance(e, GradeEvent)), None)
    errors = [e.message for e in events if isinstance(e, ErrorEvent)]
    limits = [e.limit for e in events if isinstance(e, LimitEvent)]
    return _classify(grade, errors, limits, any(isinstance(e, EnvEvent) for e in events), legacy)


def is_legacy(meta: Mapping[str, Any]) -> bool:
    """Recorded before the rollout kept the outcome (its class is derived as it always was)."""
    return "outcome" not in meta


def classify_episode(episode: Episode) -> EpisodeOutcome:
    """An episode's class (its events decide; ``outcome_problems`` holds the recorded one to them)."""
    return classify(episode.events, is_legacy(episode.meta))


def outcome_of(episode: Episode) -> str:
    """The episode's outcome class (see the module doc)."""
    return classify_episode(episode).outcome


def _classify(
    grade: Grade | None, errors: list[str], limits: list[str], acted: bool, legacy: bool
) -> EpisodeOutcome:
    if legacy:
        limits = limits + [name for m in errors if (name := legacy_limit(m))]
        errors = [m for m in errors if not legacy_limit(m)]
    limit = limits[0] if limits else None
    error = errors[0] if errors else None
    if grade is None:
        outcome = "infra"
    elif grade.infra_failure:
        timed_out = grade.timed_out or (legacy and grade.detail.startswith(LEGACY_VERIFIER_TIMEOUT))
        outcome = "verify_timeout" if timed_out else "infra"
    elif grade.passed:
        outcome = "solved"
    elif limit is not None:
        outcome = "hit_timeout" if limit == "episode_timeout_s" else "hit_step_cap"
    elif error is not None:
        outcome = "crash"
    else:
        outcome = "verified_rejected" if acted else "no_valid_action"
    return EpisodeOutcome(outcome, limit, error)


def outcome_problems(episode: Episode) -> list[str]:
    """What in the episode's recorded outcome and limits disagrees with its events (empty:
    consistent; an episode recorded before outcomes were kept has nothing to disagree with,
    unless it holds a limit event, which only a recording that keeps its outcome writes)."""
    from replaykit.cassette.events import LimitEvent

    meta, events = episode.meta, episode.events
    if is_legacy(meta):
        if any(isinstance(e, LimitEvent) for e in events):
            return ["it holds a limit event but no recorded outcome"]
        return []
    recorded = meta.get("outcome")
    if not isinstance(recorded, Mapping) or recorded.get("outcome") not in OUTCOMES:
        return [f"its recorded outcome {recorded!r} is not one of {', '.join(OUTCOMES)}"]
    derived = classify(events)
    if recorded.get("outcome") != derived.outcome or recorded.get("limit") != derived.limit:
        shown = str(recorded.get("outcome")) + (f" ({recorded['limit']})" if recorded.get("limit") else "")
        return [f"its recorded outcome {shown} does not follow from its events ({derived.outcome})"]
    return limit_problems(meta.get("limits"), events)


def _limits_of(limits: object) -> dict[str, float | None] | None:
    if not isinstance(limits, Mapping) or set(limits) != set(LIMIT_NAMES):
        return None
    values = {name: limits[name] for name in LIMIT_NAMES}
    for value in values.values():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            return None
    return values


def limit_problems(limits: object, events: Sequence[Event]) -> list[str]:
    """The events against the limits the episode recorded it ran under: no more actions than
    ``max_steps``, no action or call once its tokens were past ``max_tokens``, every limit
    event naming a limit in force with its value, and at most one."""
    from replaykit.cassette.events import LimitEvent

    values = _limits_of(limits)
    if values is None:
        return [f"its recorded limits {limits!r} are not {{{', '.join(LIMIT_NAMES)}}} of numbers > 0"]
    stops = [e for e in events if isinstance(e, LimitEvent)]
    if len(stops) > 1:
        return [f"it holds {len(stops)} limit events; a limit stops an episode once"]
    for stop in stops:
        if stop.limit not in LIMIT_NAMES or values[stop.limit] != stop.value:
            return [f"its limit event names {stop.limit}={stop.value!r}, not a limit it ran under"]
    return _spent_problems(values, events)


def _spent_problems(values: Mapping[str, float | None], events: Sequence[Event]) -> list[str]:
    """Actions and calls against ``max_steps`` and ``max_tokens``, in order, up to a limit event."""
    from replaykit.cassette.events import EnvEvent, LimitEvent, LlmEvent, event_tokens

    max_steps, max_tokens = values["max_steps"], values["max_tokens"]
    actions = tokens = 0
    for position, event in enumerate(events):
        if isinstance(event, LimitEvent):
            return _stop_problems(event, position, actions, tokens, max_steps, max_tokens)
        if not isinstance(event, (EnvEvent, LlmEvent)):
            continue
        if max_tokens is not None and tokens > max_tokens:
            return [f"event {position} was made with {tokens} tokens used, past max_tokens={max_tokens:g}"]
        if isinstance(event, LlmEvent):
            tokens += event_tokens(event)
            continue
        actions += 1
        if max_steps is not None and actions > max_steps:
            return [f"it records {actions}+ actions under max_steps={max_steps:g}"]
    return []


def _stop_problems(
    stop: LimitEvent,
    position: int,
    actions: int,
    tokens: int,
    max_steps: float | None,
    max_tokens: float | None,
) -> list[str]:
    """A limit event where its limit was not reached is not the framework's."""
    if stop.limit == "max_steps" and actions != max_steps:
        return [
            f"its max_steps limit event (event {position}) follows {actions} action(s), not {max_steps:g}"
        ]
    if stop.limit == "max_tokens" and (max_tokens is None or tokens <= max_tokens):
        return [f"its max_tokens limit event (event {position}) follows {tokens} token(s)"]
    return []


def _meta_value(doc: Mapping[str, Any], name: str) -> Any:
    """A ``meta`` field of an episode document held inline (format 1: the value; 2: ``{"v": …}``)."""
    meta = doc["meta"]
    if name not in meta:
        return None
    if doc["format"] == 1:
        return meta[name]
    return meta[name]["v"]  # a KeyError for a value kept in a blob: the caller decodes the episode


def classify_doc(doc: Mapping[str, Any]) -> tuple[EpisodeOutcome, list[str]]:
    """An episode document's class and what in its recorded outcome disagrees with it, from the
    document alone (its error, limit, grade and action events are inline; a model call's tokens
    are in blobs: ``outcome_problems`` on the decoded episode holds those too)."""
    events = doc["events"]
    grades = [e["grade"] for e in events if e["kind"] == "grade"]
    errors = [str(e["message"]) for e in events if e["kind"] == "error"]
    stops = [e for e in events if e["kind"] == "limit"]
    acted = sum(1 for e in events if e["kind"] == "env")
    grade = Grade.from_dict(grades[-1]) if grades else None
    legacy = "outcome" not in doc["meta"]
    facts = _classify(grade, errors, [str(e["limit"]) for e in stops], acted > 0, legacy)
    if legacy:
        return facts, ["it holds a limit event but no recorded outcome"] if stops else []
    recorded = _meta_value(doc, "outcome")
    limits = _limits_of(_meta_value(doc, "limits"))
    if not isinstance(recorded, Mapping) or (recorded.get("outcome"), recorded.get("limit")) != (
        facts.outcome,
        facts.limit,
    ):
        return facts, [f"its recorded outcome {recorded!r} does not follow from its events ({facts.outcome})"]
    if limits is None or (limits["max_steps"] is not None and acted > limits["max_steps"]):
        return facts, [f"it records {acted} action(s), past its recorded limits"]
    return facts, []


def stored_outcome(store: RunStore, cassette_id: str, doc: bytes | None = None) -> EpisodeOutcome:
    """A stored episode's outcome from its document (verified by its content address; ``doc``:
    its blob, already read and verified): the recorded one, held to its events; one its events
    do not give is ``store corrupt``."""
    try:
        data = doc if doc is not None else store.get_blob(store.cassette_row(cassette_id)["doc"])
        facts, problems = classify_doc(json.loads(data))
    except (KeyError, TypeError, ValueError, AttributeError):  # not a document's shape: say how, decoding it
        episode = store.get_episode(cassette_id)  # raises store corrupt, naming what is wrong
        return classify_episode(episode)
    if problems:
        raise store.corrupt(problems[0], f"cassette {cassette_id}")
    return facts
