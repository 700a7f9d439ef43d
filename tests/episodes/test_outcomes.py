"""Every episode's outcome class, derived from its events alone (episodes/outcomes.py)."""

from __future__ import annotations

import pytest

from replaykit.cassette.codec import encode_episode
from replaykit.cassette.events import EnvEvent, Episode, ErrorEvent, Event, GradeEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.envs.base import Grade, Observation
from replaykit.episodes.outcomes import OUTCOMES, classify, classify_doc, outcome_of

ACT = EnvEvent("ls", Observation("", "", 0), "s")
FAIL = GradeEvent(Grade(0.0, False, detail="reward 0 from reward.txt"))
PASS = GradeEvent(Grade(1.0, True, detail="reward 1 from reward.txt"))


@pytest.mark.parametrize(
    ("events", "outcome"),
    [
        ([ACT, PASS], "solved"),
        ([ACT, ErrorEvent("limit reached: limits.max_steps=1 (action 2 refused)"), PASS], "solved"),
        ([ACT, FAIL], "verified_rejected"),
        ([ACT, ErrorEvent("limit reached: limits.max_steps=1 (action 2 refused)"), FAIL], "hit_step_cap"),
        ([ACT, ErrorEvent("limit reached: limits.max_tokens=9 (12 tokens used)"), FAIL], "hit_step_cap"),
        (
            [ACT, ErrorEvent("limit reached: limits.episode_timeout_s=1 (the next action refused)"), FAIL],
            "hit_timeout",
        ),
        ([ACT, GradeEvent(Grade(0.0, False, True, "verifier timed out after 30s; x"))], "verify_timeout"),
        ([FAIL], "no_valid_action"),
        ([ACT, ErrorEvent("ValueError: bad json"), FAIL], "crash"),
        ([ErrorEvent("KeyError: 'x'"), FAIL], "crash"),
        ([ACT, GradeEvent(Grade(0.0, False, True, "endpoint failure: HTTP 500"))], "infra"),
        ([ACT], "infra"),  # never graded
        # a harness exception that merely mentions a limit is a crash: a limit's message has no type
        ([ACT, ErrorEvent("RuntimeError: limit reached: limits.max_steps=1"), FAIL], "crash"),
    ],
)
def test_each_class_follows_from_the_events(events: list[Event], outcome: str) -> None:
    assert outcome in OUTCOMES
    assert outcome_of(events) == outcome
    key = CassetteKey("a" * 40, "t", "d", ModelId("m", "e"), 0, "c")
    doc = encode_episode(Episode(key, events), {})  # what the store keeps: classified the same
    assert classify_doc(doc) == classify(events)


def test_the_limit_and_the_error_are_named() -> None:
    facts = classify([ACT, ErrorEvent("limit reached: limits.max_tokens=9 (12 tokens used)"), FAIL])
    assert (facts.outcome, facts.limit, facts.error) == ("hit_step_cap", "max_tokens", None)
    facts = classify([ErrorEvent("LookupError: no such thing"), FAIL])
    assert (facts.outcome, facts.limit, facts.error) == ("crash", None, "LookupError: no such thing")
