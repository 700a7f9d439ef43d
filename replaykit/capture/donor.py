"""Donor events served to a recording tape while the new episode repeats them.

Prefix reuse (``episodes/reuse.py``) and forks (``episodes/fork.py``) record a new
episode live with one or more *donor* episodes beside the tape, in order of preference.
Every event the tape records is compared with each donor's event at the same position
(digest forms: request, response bytes, action, observation, state digest, grade); a
donor that differs drops out. A model request is answered from the first donor still in
line whose event there is a model call with the exact same request — method, path and
JSON body as the harness sent it, before any scrubbing or normalisation rule (a body
those would change carries a secret or a volatile value, and is sent live) — and a 2xx
answer holding no scrubbed secret. Otherwise, or once no donor is left, the prefix has
ended and the episode is live for good: nothing after the first difference is served.

``calls`` bounds what is served (a fork serves the calls before its step, then goes
live); ``strict`` makes a difference before that bound an error (a fork that cannot
reproduce its parent's first steps is not that fork).
"""

from __future__ import annotations

from collections.abc import Sequence

from replaykit.cassette.events import Episode, Event, LlmEvent, RequestForm
from replaykit.cassette.lineage import prefix_claim
from replaykit.core.determinism import canonical_json
from replaykit.core.meta import ForkMeta, ReusedClaim

Donor = tuple[str, list[Event]]  # (cassette id, its events)


def _same_request(form: RequestForm, event: LlmEvent) -> bool:
    return (
        form["method"] == event.method
        and form["path"] == event.path
        and canonical_json(form["body"]) == canonical_json(event.body)
    )


def servable(event: LlmEvent) -> bool:
    """A donor answer that may stand for a live one: complete (2xx) and not scrubbed."""
    return 200 <= event.status < 300 and b"<secret:" not in event.content


class Donors:
    """The donors of one recording and how far the new episode has repeated them."""

    @classmethod
    def of(cls, episodes: Sequence[Episode], fork: ForkMeta | None = None) -> Donors | None:
        """Beside a recording's tape (None: no donor): a fork's parent bound at its step, strictly."""
        if not episodes:
            return None
        donors = [(e.id, e.events) for e in episodes]
        return cls(donors) if fork is None else cls(donors, calls=fork["step"], strict=True)

    def __init__(self, donors: list[Donor], calls: int | None = None, strict: bool = False) -> None:
        self.alive = list(donors)
        self.limit = calls
        self.strict = strict
        self.served = 0  # model calls answered from a donor
        self.end: int | None = None  # where the prefix ended (None: not yet)
        self.reason = ""  # why it ended there
        self.expected: Event | None = None  # the donor's event where it ended (strict reports)
        self._standing = ""  # the donor the prefix is claimed from, once it ended

    @property
    def standing(self) -> str:
        """The donor the prefix is claimed from: the first still in line (when it ended)."""
        if self.end is None:
            return self.alive[0][0] if self.alive else ""
        return self._standing

    @property
    def broken(self) -> bool:
        """Strict, and the prefix ended before serving its bound."""
        return self.strict and self.end is not None and self.served < (self.limit or 0)

    def prefix(self, length: int) -> int:
        """How many of the tape's first events came from (and equal) the donors."""
        return length if self.end is None else self.end

    def claim(self, events: list[Event], basis: str) -> ReusedClaim | None:
        """What the recorded ``events`` say they were served (None: nothing)."""
        k = self.prefix(len(events))
        return prefix_claim(self.standing, events, k, basis) if k and self.standing else None

    def _finish(self, position: int, reason: str) -> None:
        if self.end is None:
            self.end, self.reason = position, reason
            if self.alive:
                self._standing = self.alive[0][0]
                events = self.alive[0][1]
                self.expected = events[position] if position < len(events) else None
            self.alive = []

    def answer(self, position: int, form: RequestForm) -> LlmEvent | None:
        """A donor's answer to the request at ``position``; None (the prefix ends): send it live."""
        if self.end is not None:
            return None
        if self.limit is not None and self.served >= self.limit:
            self._finish(position, f"step {self.limit} is where it goes live")
            return None
        for _, events in self.alive:
            event = events[position] if position < len(events) else None
            if isinstance(event, LlmEvent) and _same_request(form, event) and servable(event):
                self.served += 1
                return event
        self._finish(position, f"the request at event {position} is not the donor's")
        return None

    def observe(self, position: int, event: Event) -> None:
        """The tape recorded ``event`` at ``position``: drop the donors whose event there differs."""
        if self.end is not None:
            return
        form = canonical_json(event.digest_form())
        keep = []
        for donor in self.alive:
            theirs = donor[1][position] if position < len(donor[1]) else None
            if theirs is event or (theirs is not None and canonical_json(theirs.digest_form()) == form):
                keep.append(donor)
        if keep:
            self.alive = keep
        else:
            self._finish(position, f"{_what(event)} at event {position} is not the donor's")


def _what(event: Event) -> str:
    return {"env": "the observation", "llm": "the answer", "grade": "the grade"}.get(
        event.kind, f"the {event.kind} event"
    )
