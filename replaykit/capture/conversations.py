"""Replay a proxy recording made by many agents at once.

Concurrent clients interleave arbitrarily, so arrival order says nothing about
which recorded exchange a request wants. ``ConversationPlayer`` matches each
request within its conversation instead:

* a client on its own **session path** (``/s/<session>/v1/...``) is one
  conversation: its requests must come in its recorded order (the one-client
  order check, per session), and the first difference is a divergence;
* on the shared ``/v1/...`` path a request is matched by **content**: the
  earliest unserved recorded exchange whose normalised request (method, path,
  canonical body) is equal. An agent re-sends its whole history, so content
  identifies the conversation and the turn; identical requests are served in
  their recorded order.

Nothing plays twice; a request no recorded exchange answers is a divergence that
names it. The replay is identical when every recorded exchange was served.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from replaykit.capture.matchers import DEFAULT_MATCH_ON, mismatches, request_diff
from replaykit.cassette.events import Event, LlmEvent, RequestForm, events_digest
from replaykit.core.determinism import canonical_json
from replaykit.core.errors import DivergenceError, DivergenceReport

SESSION_RE = re.compile(r"^/s/([A-Za-z0-9._~-]{1,128})(/.*)$")


def split_session(path: str) -> tuple[str | None, str]:
    """``/s/agent-3/v1/chat/completions`` → ``("agent-3", "/v1/chat/completions")``."""
    match = SESSION_RE.match(path)
    return (match.group(1), match.group(2)) if match else (None, path)


def content_key(form: RequestForm) -> str:
    return canonical_json([form["method"], form["path"], form["body"]])


class ConversationPlayer:
    """Serves recorded LLM exchanges to concurrent clients; thread-safe."""

    def __init__(
        self, label: str, recorded: list[Event], match_on: tuple[str, ...] = DEFAULT_MATCH_ON
    ) -> None:
        self.label = label
        self.recorded = list(recorded)
        self.match_on = match_on
        self.served: list[bool] = [False] * len(self.recorded)
        self.sessions: dict[str, deque[int]] = {}
        self.by_content: dict[str, deque[int]] = {}
        self.divergences: list[DivergenceError] = []
        self.lock = threading.Lock()
        for i, event in enumerate(self.recorded):
            if not isinstance(event, LlmEvent):
                continue
            session, _ = split_session(event.path)
            if session is not None:
                self.sessions.setdefault(session, deque()).append(i)
            else:
                self.by_content.setdefault(content_key(event.request_form()), deque()).append(i)

    @property
    def divergence(self) -> DivergenceError | None:
        return self.divergences[0] if self.divergences else None

    @property
    def cursor(self) -> int:
        """How many recorded exchanges were served."""
        return sum(self.served)

    @property
    def digest(self) -> str:
        """The digest of what was served, in recorded order (equal to the recording's when all was)."""
        return events_digest([e for e, done in zip(self.recorded, self.served, strict=True) if done])

    @property
    def complete(self) -> bool:
        return all(self.served)

    def _diverge(
        self, position: int | None, reason: str, expected: Any, actual: RequestForm
    ) -> DivergenceError:
        report: DivergenceReport = {
            "episode": self.label,
            "position": position,
            "kind": "llm",
            "reason": reason,
            "expected": expected,
            "actual": actual,
            "diff": request_diff(expected, actual) if expected is not None else [],
        }
        where = f"event {position}" if position is not None else "no recorded event"
        error = DivergenceError(f"episode {self.label} diverged at {where}: {reason}", report)
        self.divergences.append(error)
        return error

    def play(self, form: RequestForm) -> LlmEvent:
        """The recorded exchange for this request, or :class:`DivergenceError`."""
        session, _ = split_session(form["path"])
        with self.lock:
            if session is not None:
                return self._play_session(session, form)
            event = self._take_shared(form)
            if event is not None:
                return event
            raise self._shared_divergence(form)

    def take(self, form: RequestForm) -> LlmEvent | None:
        """The recorded exchange for this request by content (session paths too), or None;
        never a divergence (a resumed session records what it does not find)."""
        with self.lock:
            session, _ = split_session(form["path"])
            if session is None:
                return self._take_shared(form)
            queue = self.sessions.get(session)
            for i in queue or ():
                expected = self.recorded[i]
                assert isinstance(expected, LlmEvent)
                if not mismatches(form, expected.request_form(), self.match_on):
                    assert queue is not None
                    queue.remove(i)
                    self.served[i] = True
                    return expected
            return None

    def divergence_for(self, form: RequestForm) -> DivergenceError:
        """The divergence a request that :meth:`take` did not find is (kept in ``divergences``)."""
        with self.lock:
            session, _ = split_session(form["path"])
            if session is not None:
                what = f"request {form['method']} {form['path']}"
                return self._diverge(
                    None, f"{what} matches no unserved recorded request of session {session!r}", None, form
                )
            return self._shared_divergence(form)

    def _take_shared(self, form: RequestForm) -> LlmEvent | None:
        queue = self.by_content.get(content_key(form))
        if queue:
            i = queue.popleft()
            self.served[i] = True
            event = self.recorded[i]
            assert isinstance(event, LlmEvent)
            return event
        if self.match_on != DEFAULT_MATCH_ON:  # matched on less than the content: the first that fits
            return self._first_matching(form)
        return None

    def _shared_divergence(self, form: RequestForm) -> DivergenceError:
        """The divergence of a shared-path request nothing recorded answers (lock held): a diff
        against the nearest unserved exchange, if any is left."""
        what = f"request {form['method']} {form['path']}"
        nearest = self._nearest(form)
        if nearest is None:
            return self._diverge(
                None, f"{what} was not recorded here (the recording has no unserved request left)", None, form
            )
        expected = self.recorded[nearest]
        assert isinstance(expected, LlmEvent)
        reasons = "; ".join(mismatches(form, expected.request_form(), self.match_on))
        return self._diverge(
            nearest,
            f"request differs ({reasons}): {what} matches no unserved recorded request (diff against the nearest)",
            expected.request_form(),
            form,
        )

    def _first_matching(self, form: RequestForm) -> LlmEvent | None:
        """The earliest unserved shared-path exchange that ``match_on`` finds equal (lock held)."""
        for i, event in enumerate(self.recorded):
            if self.served[i] or not isinstance(event, LlmEvent) or split_session(event.path)[0] is not None:
                continue
            if not mismatches(form, event.request_form(), self.match_on):
                self.served[i] = True
                queue = self.by_content.get(content_key(event.request_form()))
                if queue is not None and i in queue:
                    queue.remove(i)
                return event
        return None

    def _play_session(self, session: str, form: RequestForm) -> LlmEvent:
        queue = self.sessions.get(session)
        what = f"request {form['method']} {form['path']}"
        if not queue:
            raise self._diverge(
                None,
                f"{what} was not recorded here (the end of the recording of session {session!r})",
                None,
                form,
            )
        i = queue[0]
        expected = self.recorded[i]
        assert isinstance(expected, LlmEvent)
        reasons = mismatches(form, expected.request_form(), self.match_on)
        if reasons:
            raise self._diverge(
                i, "request differs (" + "; ".join(reasons) + ")", expected.request_form(), form
            )
        queue.popleft()
        self.served[i] = True
        return expected

    def _nearest(self, form: RequestForm) -> int | None:
        """The unserved shared-path exchange with the same path and the longest common history."""
        best: tuple[int, int] | None = None
        for i, event in enumerate(self.recorded):
            if self.served[i] or not isinstance(event, LlmEvent) or split_session(event.path)[0] is not None:
                continue
            score = _shared_prefix(event.body, form["body"]) + (1000 if event.path == form["path"] else 0)
            if best is None or score > best[0]:
                best = (score, i)
        return best[1] if best else None


def _shared_prefix(a: Any, b: Any) -> int:
    """How many leading history items (messages or input) two request bodies share."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return 0
    for name in ("messages", "input"):
        x, y = a.get(name), b.get(name)
        if isinstance(x, list) and isinstance(y, list):
            n = 0
            for p, q in zip(x, y, strict=False):
                if p != q:
                    break
                n += 1
            return n
    return 0


def _history(body: Any) -> list[Any] | None:
    """A chat request's history: ``messages`` (chat completions) or a list ``input`` (responses)."""
    if not isinstance(body, dict):
        return None
    for name in ("messages", "input"):
        value = body.get(name)
        if isinstance(value, list):
            return value
    return None


def _response_id(event: LlmEvent) -> str | None:
    """The ``id`` of a Responses API answer (plain JSON, or the ``response.created`` SSE event)."""
    for line in event.content.split(b"\n"):
        text = line[6:] if line.startswith(b"data: ") else line
        if b'"id"' not in text:
            continue
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            data = json.loads(text)
            data = data.get("response", data) if isinstance(data, dict) else None
            if isinstance(data, dict) and isinstance(data.get("id"), str):
                return str(data["id"])
    return None


class Continuations:
    """Which requests continue a recorded conversation where its recording stopped.

    A resumed session (``replaykit proxy --record-mode once`` on a session whose recording
    stopped early) records a request live only when it takes up a conversation at its
    recorded end: its history extends a recorded request's history that no other recorded
    request extends (a *leaf*), or (Responses API) its ``previous_response_id`` names a
    recorded answer nothing recorded followed up. Anything else is a divergence: the recorded
    prefix of the conversation must hold, never be silently replaced by a new branch."""

    def __init__(self, recorded: list[Event]) -> None:
        self.lock = threading.Lock()
        self.histories: list[tuple[str, list[Any]]] = []
        self.followed: set[str] = set()
        self.answers: set[str] = set()
        for event in recorded:
            if isinstance(event, LlmEvent):
                self.add(event)

    def add(self, event: LlmEvent) -> None:
        """Count a recorded (or newly recorded) exchange."""
        with self.lock:
            path = split_session(event.path)[1]
            history = _history(event.body)
            if history is not None:
                self.histories.append((path, history))
            previous = event.body.get("previous_response_id") if isinstance(event.body, dict) else None
            if isinstance(previous, str):
                self.followed.add(previous)
            answer = _response_id(event) if path.endswith("/responses") else None
            if answer is not None:
                self.answers.add(answer)

    def continues(self, form: RequestForm) -> bool:
        with self.lock:
            body, path = form["body"], split_session(form["path"])[1]
            previous = body.get("previous_response_id") if isinstance(body, dict) else None
            if isinstance(previous, str):
                return previous in self.answers and previous not in self.followed
            history = _history(body)
            if not history:
                return False
            return any(
                p == path and len(h) < len(history) and history[: len(h)] == h and self._leaf(p, h)
                for p, h in self.histories
            )

    def _leaf(self, path: str, history: list[Any]) -> bool:
        return not any(
            p == path and len(h) > len(history) and h[: len(history)] == history for p, h in self.histories
        )


@dataclass
class Resume:
    """A session whose recording stopped early, taken up again: its recorded exchanges
    (served by content), and which new requests continue its conversations."""

    recorded: list[Event]
    player: ConversationPlayer = field(init=False)
    continuations: Continuations = field(init=False)

    def __post_init__(self) -> None:
        self.player = ConversationPlayer("resume", self.recorded)
        self.continuations = Continuations(self.recorded)
