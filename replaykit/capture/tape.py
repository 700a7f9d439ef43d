"""The tape: one execution of an episode, either recording or replaying.

Recording appends every event as it happens. Replaying walks the recorded events
with one cursor: request *i* must equal recorded request *i* (after
normalisation), env action *j* the recorded action *j*, in the recorded order.
The first difference raises :class:`DivergenceError` and stays raised (a harness
that swallows the exception cannot hide it). A request past the end of the
recording is an error naming it — never a network call.

A recording tape may have donors beside it (``donor.py``: prefix reuse, forks): while
the new episode repeats them, :meth:`Tape.serve` answers its requests from them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from replaykit.capture.donor import Donors
from replaykit.capture.matchers import DEFAULT_MATCH_ON, mismatches, request_diff
from replaykit.cassette.events import (
    EnvEvent,
    ErrorEvent,
    Event,
    GradeEvent,
    LimitEvent,
    LlmEvent,
    NetEvent,
    RequestForm,
    events_digest,
)
from replaykit.cassette.scrub import Scrubber
from replaykit.core.determinism import canonical_json
from replaykit.core.errors import DivergenceError, DivergenceReport


def _describe(event: Event | None) -> str:
    if event is None:
        return "the end of the recording"
    if isinstance(event, LlmEvent):
        return f"request {event.method} {event.path}"
    if isinstance(event, EnvEvent):
        return f"env action {event.action!r}"
    return f"{event.kind} event"


class Tape:
    def __init__(
        self, label: str, recorded: list[Event] | None = None, match_on: tuple[str, ...] = DEFAULT_MATCH_ON
    ) -> None:
        self.label = label
        self.recorded = recorded
        self.match_on = match_on
        self.events: list[Event] = []
        self.cursor = 0
        self.divergence: DivergenceError | None = None
        self._canonical: dict[int, str] = {}  # id(recorded event) -> canonical body
        self.scrubber = Scrubber()  # what is stored, compared and reported is scrubbed with it
        self.transport_errors: list[Any] = []  # endpoint failures that left no event (refused, timed out)
        self.on_call: Callable[[], None] | None = None  # called before each model call (an episode's limits)
        self.sealed = False  # a limit was recorded: no model call or action is kept after it
        self.donors: Donors | None = (
            None  # recording: episodes whose answers it is served while it repeats them
        )

    @property
    def replaying(self) -> bool:
        return self.recorded is not None

    @property
    def digest(self) -> str:
        return events_digest(self.events)

    @property
    def llm_events(self) -> list[LlmEvent]:
        """The model calls taped so far, in order (as ``Episode.llm_events``)."""
        return [e for e in self.events if isinstance(e, LlmEvent)]

    # -- divergence ----------------------------------------------------------------
    def diverge(self, kind: str, reason: str, expected: Any, actual: Any, diff: list[str]) -> DivergenceError:
        if self.divergence is None:
            report: DivergenceReport = {
                "episode": self.label,
                "position": self.cursor,
                "kind": kind,
                "reason": reason,
                "expected": expected,
                "actual": actual,
                "diff": diff,
            }
            if self.scrubber:  # a divergence report never prints a secret
                report = json.loads(self.scrubber.text(json.dumps(report, ensure_ascii=False, default=str)))
                reason = self.scrubber.text(reason)
            self.divergence = DivergenceError(
                f"episode {self.label} diverged at event {self.cursor}: {reason}", report
            )
        return self.divergence

    def _next(self, kind: str, actual: Any) -> Event:
        if self.divergence is not None:
            raise self.divergence
        assert self.recorded is not None
        # what the container fetched during an action is served with it (offline, nothing runs)
        while self.cursor < len(self.recorded) and isinstance(self.recorded[self.cursor], NetEvent):
            self.events.append(self.recorded[self.cursor])
            self.cursor += 1
        expected = self.recorded[self.cursor] if self.cursor < len(self.recorded) else None
        if expected is None or expected.kind != kind:
            if kind == "grade" and expected is not None:  # the new harness stopped where the old went on
                left = len(self.recorded) - self.cursor - 1  # events after the next, before the grade
                ended = f"after event {self.cursor - 1}" if self.cursor else "before its first event"
                reason = (
                    f"the harness ended {ended} (it asked for its grade); "
                    f"the recording goes on with {_describe(expected)}"
                    + (f" and {left} more event(s)" if left > 0 else "")
                )
            else:
                what = (
                    f"{kind} {actual!r}" if kind != "llm" else f"request {actual['method']} {actual['path']}"
                )
                reason = f"{what} was not recorded here (the recording has {_describe(expected)})"
            raise self.diverge(
                kind,
                reason,
                _form(expected),
                actual,
                request_diff(_form(expected), actual) if kind == "llm" else [],
            )
        return expected

    # -- llm -------------------------------------------------------------------------
    def _same(self, form: RequestForm, expected: LlmEvent) -> bool:
        """Fast path of the default matchers: the same method, path and canonical body
        (the recorded body's canonical form computed once per event)."""
        if (
            self.match_on != DEFAULT_MATCH_ON
            or form["method"] != expected.method
            or form["path"] != expected.path
        ):
            return False
        canon = self._canonical.get(id(expected))
        if canon is None:
            canon = self._canonical[id(expected)] = canonical_json(expected.body)
        return canonical_json(form["body"]) == canon

    def play_llm(self, form: RequestForm) -> LlmEvent:
        expected = self._next("llm", form)
        assert isinstance(expected, LlmEvent)
        reasons = (
            [] if self._same(form, expected) else mismatches(form, expected.request_form(), self.match_on)
        )
        if reasons:
            raise self.diverge(
                "llm",
                "request differs (" + "; ".join(reasons) + ")",
                expected.request_form(),
                form,
                request_diff(expected.request_form(), form),
            )
        self.cursor += 1
        self.events.append(expected)
        return expected

    # -- env ---------------------------------------------------------------------------
    def play_env(self, action: str) -> EnvEvent:
        action = self.scrubber.text(action)  # recorded actions were stored scrubbed
        expected = self._next("env", action)
        assert isinstance(expected, EnvEvent)
        if expected.action != action:
            import difflib

            diff = list(
                difflib.unified_diff(
                    expected.action.splitlines(), action.splitlines(), "recorded", "replayed", lineterm=""
                )
            )
            raise self.diverge("env", "env action differs", expected.action, action, diff)
        self.cursor += 1
        self.events.append(expected)
        return expected

    # -- error / grade -----------------------------------------------------------------
    def play_error(self, message: str) -> None:
        message = self.scrubber.text(message)
        expected = self._next("error", message)
        assert isinstance(expected, ErrorEvent)
        if expected.message != message:
            raise self.diverge("error", "the harness raised differently", expected.message, message, [])
        self.cursor += 1
        self.events.append(expected)

    def play_limit(self, event: LimitEvent) -> None:
        """The limit a replay reached where the recording did (``episodes/limits.py`` serves it)."""
        expected = self._next("limit", event.message)
        if expected.digest_form() != event.digest_form():
            raise self.diverge(
                "limit",
                "the episode stopped at another limit",
                expected.digest_form(),
                event.digest_form(),
                [],
            )
        self.cursor += 1
        self.events.append(expected)

    def play_grade(self) -> GradeEvent:
        expected = self._next("grade", "grade")
        assert isinstance(expected, GradeEvent)
        self.cursor += 1
        self.events.append(expected)
        return expected

    def check_complete(self, what: str = "replay") -> None:
        """Raise the divergence, if any, or if a replay stopped before the recording's end."""
        if self.divergence is None and self.replaying and self.cursor != len(self.recorded or []):
            self.diverge(
                "end",
                f"{what} ended after {self.cursor} of {len(self.recorded or [])} recorded events",
                None,
                None,
                [],
            )
        if self.divergence is not None:
            raise self.divergence

    def record(self, event: Event) -> None:
        if self.sealed and isinstance(event, (LlmEvent, EnvEvent)):
            return  # past the episode's limit: a call still in flight in another thread is not kept
        if self.donors is not None:
            self.donors.observe(len(self.events), event)
            self._check_donors(event)
        self.events.append(event)

    # -- donors ------------------------------------------------------------------------
    def serve(self, form: RequestForm) -> LlmEvent | None:
        """A donor's answer to this request (recorded on the tape as it is), or None: send it live."""
        if self.donors is None or self.divergence is not None:
            return None
        event = self.donors.answer(len(self.events), form)
        if event is None:
            self._check_donors(form)
            return None
        self.record(event)
        return event

    def _check_donors(self, actual: Event | RequestForm) -> None:
        """A strict tape (a fork) whose prefix ended before its step: the divergence, raised."""
        donors = self.donors
        if donors is None or not donors.broken:
            return
        self.cursor = donors.end or 0
        theirs = donors.expected
        diff: list[str] = []
        if isinstance(actual, dict):  # a request the donor had no answer for
            expected: Any = theirs.request_form() if isinstance(theirs, LlmEvent) else _digest(theirs)
            mine: Any = actual
            if isinstance(theirs, LlmEvent):
                diff = request_diff(expected, actual)
        else:
            expected, mine = _digest(theirs), actual.digest_form()
        raise self.diverge("fork", f"{donors.reason} (cassette {donors.standing})", expected, mine, diff)


def _digest(event: Event | None) -> Any:
    return None if event is None else event.digest_form()


def _form(event: Event | None) -> Any:
    if isinstance(event, LlmEvent):
        return event.request_form()
    if isinstance(event, EnvEvent):
        return event.action
    return None if event is None else event.digest_form()
