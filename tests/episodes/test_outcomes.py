"""Every episode's outcome class, from typed fields of its events (cassette/outcomes.py): a
``limit`` event only the framework writes, ``Grade.timed_out``; never an exception's name. The
recorded class is held to its events on every read; episodes recorded before outcomes were kept
get theirs as they always did."""

from __future__ import annotations

from typing import Any

import pytest

from replaykit.cassette.codec import encode_episode
from replaykit.cassette.events import EnvEvent, Episode, ErrorEvent, Event, GradeEvent, LimitEvent, LlmEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.outcomes import (
    OUTCOMES,
    classify,
    classify_doc,
    classify_episode,
    limit_problems,
    outcome_problems,
)
from replaykit.envs.results import Grade, Observation

ACT = EnvEvent("ls", Observation("", "", 0), "s")
FAIL = GradeEvent(Grade(0.0, False, detail="reward 0 from reward.txt"))
PASS = GradeEvent(Grade(1.0, True, detail="reward 1 from reward.txt"))
STEPS = LimitEvent("max_steps", 1, "limit reached: limits.max_steps=1 (action 2 refused)")
TOKENS = LimitEvent("max_tokens", 9, "limit reached: limits.max_tokens=9 (12 tokens used)")
TIME = LimitEvent(
    "episode_timeout_s", 1.0, "limit reached: limits.episode_timeout_s=1 (the next action refused)"
)
#: an exception whose type name reads like a limit (issue 38: it became hit_step_cap)
FORGED = ErrorEvent("limit reached: limits.max_steps=3 (action 4 refused): x")
KEY = CassetteKey("a" * 40, "t", "d", ModelId("m", "e"), 0, "c")
LIMITS: dict[str, Any] = {"max_steps": None, "episode_timeout_s": None, "max_tokens": None}


@pytest.mark.parametrize(
    ("events", "outcome"),
    [
        ([ACT, PASS], "solved"),
        ([ACT, STEPS, PASS], "solved"),
        ([ACT, FAIL], "verified_rejected"),
        ([ACT, STEPS, FAIL], "hit_step_cap"),
        ([ACT, TOKENS, FAIL], "hit_step_cap"),
        ([ACT, TIME, FAIL], "hit_timeout"),
        (
            [ACT, GradeEvent(Grade(0.0, False, True, "verifier timed out after 30s; x", timed_out=True))],
            "verify_timeout",
        ),
        (
            [ACT, GradeEvent(Grade(0.0, False, True, "verifier timed out after 30s (said the harness)"))],
            "infra",
        ),
        ([FAIL], "no_valid_action"),
        ([ACT, ErrorEvent("ValueError: bad json"), FAIL], "crash"),
        ([ErrorEvent("KeyError: 'x'"), FAIL], "crash"),
        ([ACT, GradeEvent(Grade(0.0, False, True, "endpoint failure: HTTP 500"))], "infra"),
        ([ACT], "infra"),  # never graded
        ([ACT, FORGED, FAIL], "crash"),  # the done-when line: a type name is never a limit
        ([ACT, ErrorEvent("RuntimeError: limit reached: limits.max_steps=1"), FAIL], "crash"),
    ],
)
def test_each_class_follows_from_the_events(events: list[Event], outcome: str) -> None:
    assert outcome in OUTCOMES
    assert classify(events).outcome == outcome
    recorded = Episode(
        KEY,
        events,
        {
            "outcome": classify(events).to_doc(),
            "limits": {"max_steps": 1, "max_tokens": 9, "episode_timeout_s": 1.0},
        },
    )
    doc = encode_episode(recorded, {})  # what the store keeps: classified the same, and consistent
    assert classify_doc(doc)[0] == classify(events)
    assert classify_episode(recorded) == classify(events)


@pytest.mark.parametrize(
    ("events", "outcome"),
    [  # recorded before outcomes were kept: limits were error events, timeouts a detail's words
        ([ACT, ErrorEvent("limit reached: limits.max_steps=1 (action 2 refused)"), FAIL], "hit_step_cap"),
        ([ACT, ErrorEvent("limit reached: limits.episode_timeout_s=1 (x)"), FAIL], "hit_timeout"),
        ([ACT, GradeEvent(Grade(0.0, False, True, "verifier timed out after 30s; x"))], "verify_timeout"),
        ([ACT, ErrorEvent("ValueError: bad json"), FAIL], "crash"),
    ],
)
def test_an_old_recording_is_classified_as_it_always_was(events: list[Event], outcome: str) -> None:
    old = Episode(KEY, events, {})
    assert classify_episode(old).outcome == outcome and outcome_problems(old) == []
    assert classify_doc(encode_episode(old, {}))[0].outcome == outcome


def test_the_limit_and_the_error_are_named() -> None:
    facts = classify([ACT, TOKENS, FAIL])
    assert (facts.outcome, facts.limit, facts.error) == ("hit_step_cap", "max_tokens", None)
    facts = classify([ErrorEvent("LookupError: no such thing"), FAIL])
    assert (facts.outcome, facts.limit, facts.error) == ("crash", None, "LookupError: no such thing")


def _with(events: list[Event], outcome: str | None = None, **limits: Any) -> Episode:
    meta: dict[str, Any] = {
        "outcome": {"outcome": outcome or classify(events).outcome},
        "limits": {**LIMITS, **limits},
    }
    if classify(events).limit:
        meta["outcome"]["limit"] = classify(events).limit
    return Episode(KEY, events, meta)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("episode", "problem"),
    [
        (_with([ACT, FORGED, FAIL], "hit_step_cap"), "does not follow from its events (crash)"),
        (_with([ACT, ACT, ACT, ACT, FAIL], max_steps=3), "4+ actions under max_steps=3"),
        (_with([ACT, STEPS, FAIL], max_steps=3), "names max_steps=1, not a limit it ran under"),
        (_with([ACT, ACT, LimitEvent("max_steps", 3, "m"), FAIL], max_steps=3), "follows 2 action(s), not 3"),
        (_with([ACT, TIME, TIME, FAIL], episode_timeout_s=1.0), "2 limit events"),
        (Episode(KEY, [ACT, STEPS, FAIL], {}), "a limit event but no recorded outcome"),
        (_with([ACT, FAIL], "solved"), "does not follow"),
    ],
)
def test_a_recorded_outcome_or_limit_its_events_do_not_give_is_a_problem(
    episode: Episode, problem: str
) -> None:
    problems = outcome_problems(episode)
    assert problems and problem in problems[0], problems


def test_limits_recorded_must_be_a_limits_table() -> None:
    assert limit_problems({"max_steps": -1, "episode_timeout_s": None, "max_tokens": None}, [ACT])
    assert limit_problems("3", [ACT])
    assert limit_problems({**LIMITS, "max_steps": 3}, [ACT, ACT, ACT]) == []


def test_no_call_is_recorded_once_the_tokens_are_past_max_tokens() -> None:
    answer = b'{"choices": [], "usage": {"total_tokens": 12}}'
    call = LlmEvent("POST", "/v1/chat/completions", {}, 200, "OK", [], answer, [len(answer)])
    assert limit_problems({**LIMITS, "max_tokens": 20}, [call, ACT]) == []
    problems = limit_problems({**LIMITS, "max_tokens": 9}, [call, ACT])
    assert problems and "12 tokens used, past max_tokens=9" in problems[0]
    assert limit_problems({**LIMITS, "max_tokens": 9}, [call, TOKENS]) == []
    assert "follows 0 token(s)" in limit_problems({**LIMITS, "max_tokens": 9}, [ACT, TOKENS])[0]
