"""Framework limits on one episode: steps, time and tokens, enforced whatever the harness does.

A config's ``limits:`` section (:class:`LimitsConfig`) sets ``max_steps`` (environment
actions), ``episode_timeout_s`` (default: the task's agent timeout, as ``env.timeout_multiplier``
/ ``env.agent_timeout_multiplier`` scale it: ``envs/limits.py``) and ``max_tokens`` (what
the endpoint reported, summed). The
rollout gives each episode a :class:`Budget`, checked before every environment action
and every model call: past a limit the call is refused with :class:`EpisodeLimit`
(a ``BaseException``, so a harness's ``except Exception`` does not swallow it; every
later call is refused too), an action never runs past the time left, a harness busy between
calls past its deadline is interrupted (``watchdog.py``), and the episode records one ``limit``
event (``cassette/events.py``: the framework's own kind, never read from what the harness
raised), ``limit reached: limits.NAME=VALUE (…)``, before it is graded. The actions and tokens
are counted from the recorded events, so nothing a harness holds can reset them. A replay
serves that event where it was recorded: a limit is part of the recording, like an
observation, never re-measured against this machine's clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, field_validator

from replaykit.capture.tape import Tape
from replaykit.cassette.events import EnvEvent, ErrorEvent, LimitEvent, LlmEvent, NetEvent, event_tokens
from replaykit.cassette.outcomes import legacy_limit
from replaykit.core.meta import LimitsMeta

#: what the harness is told when a limit refuses its call (``limit reached: limits.NAME=VALUE (…)``)
LIMIT_PREFIX = "limit reached: limits."


def _shown(value: object) -> str:
    """A value as YAML spells it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else repr(value)


class LimitsConfig(BaseModel):
    """The ``limits:`` section: unset means no limit (the episode timeout: the task's agent
    timeout). Part of the config digest once any is set."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int | None = None
    episode_timeout_s: float | None = None
    max_tokens: int | None = None

    @field_validator("max_steps", "max_tokens", mode="before")
    @classmethod
    def _count(cls, value: object) -> object:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"expected a whole number >= 1 (got {_shown(value)}); leave it out for no limit")
        return value

    @field_validator("episode_timeout_s", mode="before")
    @classmethod
    def _positive(cls, value: object) -> object:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise ValueError(
                f"expected a number of seconds > 0 (got {_shown(value)}); leave it out for the task's"
            )
        return value

    def digest_part(self) -> dict[str, object]:
        """What enters the config digest: the keys set."""
        return self.model_dump(exclude_none=True)

    def for_task(self, agent_timeout_s: float) -> EpisodeLimits:
        """The limits one episode of a task (of this agent timeout, already scaled) runs under."""
        return EpisodeLimits(self.max_steps, self.episode_timeout_s or agent_timeout_s, self.max_tokens)


@dataclass(frozen=True)
class EpisodeLimits:
    """One episode's resolved limits (None: none); picklable, part of an ``EpisodeSpec``."""

    max_steps: int | None = None
    timeout_s: float | None = None
    max_tokens: int | None = None

    def to_meta(self) -> LimitsMeta:
        """What the episode records it ran under (``meta["limits"]``, checked on every read)."""
        return {
            "max_steps": self.max_steps,
            "episode_timeout_s": self.timeout_s,
            "max_tokens": self.max_tokens,
        }


class EpisodeLimit(BaseException):
    """A call refused past a framework limit (its message is the recorded ``limit`` event's)."""


class Budget:
    """What is left of one episode's limits, checked at each action and model call. The actions
    and tokens are counted from what the tape recorded (nothing the harness holds)."""

    def __init__(self, limits: EpisodeLimits, tape: Tape, action_timeout_s: float | None = None) -> None:
        self.limits = limits
        self.tape = tape
        self.action_timeout_s = action_timeout_s  # the env's own per-action timeout (env.timeout_sec)
        self.hit: LimitEvent | ErrorEvent | None = None  # the limit's event, once one is reached
        self.legacy = False  # replaying a recording whose limits are error events (see cassette/outcomes.py)
        self.acting = 0  # actions running now, in any thread (the watchdog waits for them)
        self._acting_lock = threading.Lock()
        self._deadline: float | None = None
        self._tokens = self._actions = 0
        self._counted = 0  # tape events counted in _tokens and _actions

    def start(self) -> None:
        """The harness starts now: the episode's clock runs from here (a replay's only tells its
        watchdog when to look for the recorded limit: a limit is never re-measured)."""
        if self.limits.timeout_s is not None:
            self._deadline = time.monotonic() + self.limits.timeout_s

    @property
    def deadline(self) -> float | None:
        """When the episode's time runs out (``time.monotonic``; None: no clock, or replaying)."""
        return self._deadline

    @contextmanager
    def action(self) -> Iterator[None]:
        """An action runs (the watchdog never interrupts it: it ends within the time left)."""
        with self._acting_lock:
            self.acting += 1
        try:
            yield
        finally:
            with self._acting_lock:
                self.acting -= 1

    def check(self, acting: bool) -> None:
        """Refuse the next action (``acting``) or model call past a limit."""
        if self.hit is None:
            self.hit = self._served() if self.tape.replaying else self._reached(acting)
        if self.hit is not None:
            raise EpisodeLimit(self.hit.message)

    def expire(self) -> bool:
        """The episode's time ran out while the harness was between calls (the watchdog asks):
        whether it must stop now. A replay stops it only where the recording did (the next
        recorded event is the limit)."""
        if self.hit is None:
            if self.tape.replaying:
                self.hit = self._served()
            elif self.limits.timeout_s is not None:
                self.hit = self._limit("episode_timeout_s", "the harness was stopped")
        return self.hit is not None

    def settle(self) -> None:
        """The harness stopped (returned or raised): a replay serves the limit the recording
        reached here, where the harness was stopped between calls."""
        if self.hit is None and self.tape.replaying:
            self.hit = self._served()

    def message(self) -> str:
        """What the harness is told of the limit reached."""
        return self.hit.message if self.hit is not None else f"{LIMIT_PREFIX}episode_timeout_s"

    def action_timeout(self, requested: float | None) -> float | None:
        """An action's timeout: never past the episode's deadline."""
        if self._deadline is None:
            return requested
        left = max(self._deadline - time.monotonic(), 0.001)
        asked = requested if requested is not None else self.action_timeout_s
        return left if asked is None else min(asked, left)

    def _served(self) -> LimitEvent | ErrorEvent | None:
        """Replaying: the limit the recording reached here, if it did."""
        recorded, i = self.tape.recorded or [], self.tape.cursor
        while i < len(recorded) and isinstance(recorded[i], NetEvent):
            i += 1
        event = recorded[i] if i < len(recorded) else None
        if isinstance(event, LimitEvent):
            return event
        if self.legacy and isinstance(event, ErrorEvent) and legacy_limit(event.message):
            return event
        return None

    def _limit(self, name: str, what: str) -> LimitEvent:
        value: float = getattr(self.limits, "timeout_s" if name == "episode_timeout_s" else name)
        return LimitEvent(name, value, f"{LIMIT_PREFIX}{name}={value:g} ({what})")

    def _reached(self, acting: bool) -> LimitEvent | None:
        lim = self.limits
        actions, tokens = self.counts()
        if acting and lim.max_steps is not None and actions >= lim.max_steps:
            return self._limit("max_steps", f"action {actions + 1} refused")
        if lim.max_tokens is not None and tokens > lim.max_tokens:
            return self._limit("max_tokens", f"{tokens} tokens used")
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return self._limit(
                "episode_timeout_s", f"the next {'action' if acting else 'model call'} refused"
            )
        return None

    def counts(self) -> tuple[int, int]:
        """Actions recorded and tokens the endpoint reported so far in this episode."""
        events = self.tape.events
        for event in events[self._counted :]:
            if isinstance(event, LlmEvent):
                self._tokens += event_tokens(event)
            elif isinstance(event, EnvEvent):
                self._actions += 1
        self._counted = len(events)
        return self._actions, self._tokens

    def tokens(self) -> int:
        """Tokens the endpoint reported so far in this episode."""
        return self.counts()[1]
