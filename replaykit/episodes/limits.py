"""Framework limits on one episode: steps, time and tokens, enforced whatever the harness does.

A config's ``limits:`` section (:class:`LimitsConfig`) sets ``max_steps`` (environment
actions), ``episode_timeout_s`` (default: the task's agent timeout, as ``env.timeout_multiplier``
/ ``env.agent_timeout_multiplier`` scale it: ``envs/limits.py``) and ``max_tokens`` (what
the endpoint reported, summed). The
rollout gives each episode a :class:`Budget`, checked before every environment action
and every model call: past a limit the call is refused with :class:`EpisodeLimit`
(a ``BaseException``, so a harness's ``except Exception`` does not swallow it; every
later call is refused too), an action never runs past the time left, and the episode
records one ``error`` event, ``limit reached: limits.NAME=VALUE (…)``, before it is
graded. A replay serves that event where it was recorded: a limit is part of the
recording, like an observation, never re-measured against this machine's clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, field_validator

from replaykit.capture.tape import Tape
from replaykit.cassette.events import ErrorEvent, LlmEvent, NetEvent, event_tokens

#: the ``error`` event message of a limit starts so (an exception's type never holds a space)
LIMIT_PREFIX = "limit reached: limits."
LIMIT_NAMES = ("max_steps", "episode_timeout_s", "max_tokens")


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

    def to_meta(self) -> dict[str, float | int | None]:
        return {
            "max_steps": self.max_steps,
            "episode_timeout_s": self.timeout_s,
            "max_tokens": self.max_tokens,
        }


class EpisodeLimit(BaseException):
    """A call refused past a framework limit (its message is the recorded ``error`` event)."""


def limit_of(message: str) -> str | None:
    """The limit an ``error`` event's message records (``max_steps``, …), else None."""
    if not message.startswith(LIMIT_PREFIX):
        return None
    name = message[len(LIMIT_PREFIX) :].split("=", 1)[0]
    return name if name in LIMIT_NAMES else None


class Budget:
    """What is left of one episode's limits, checked at each action and model call."""

    def __init__(self, limits: EpisodeLimits, tape: Tape, action_timeout_s: float | None = None) -> None:
        self.limits = limits
        self.tape = tape
        self.action_timeout_s = action_timeout_s  # the env's own per-action timeout (env.timeout_sec)
        self.hit: str | None = None  # the limit's message, once one is reached
        self.actions = 0
        self._deadline: float | None = None
        self._tokens = 0
        self._counted = 0  # tape events whose tokens are in _tokens

    def start(self) -> None:
        """The harness starts now: the episode's clock runs from here (recording only)."""
        if self.limits.timeout_s is not None and not self.tape.replaying:
            self._deadline = time.monotonic() + self.limits.timeout_s

    def check(self, acting: bool) -> None:
        """Refuse the next action (``acting``) or model call past a limit."""
        if self.hit is None:
            self.hit = self._served() if self.tape.replaying else self._reached(acting)
        if self.hit is not None:
            raise EpisodeLimit(self.hit)

    def action_timeout(self, requested: float | None) -> float | None:
        """An action's timeout: never past the episode's deadline."""
        if self._deadline is None:
            return requested
        left = max(self._deadline - time.monotonic(), 0.001)
        asked = requested if requested is not None else self.action_timeout_s
        return left if asked is None else min(asked, left)

    def _served(self) -> str | None:
        """Replaying: the limit the recording reached here, if it did."""
        recorded, i = self.tape.recorded or [], self.tape.cursor
        while i < len(recorded) and isinstance(recorded[i], NetEvent):
            i += 1
        event = recorded[i] if i < len(recorded) else None
        return event.message if isinstance(event, ErrorEvent) and limit_of(event.message) else None

    def _reached(self, acting: bool) -> str | None:
        lim = self.limits
        if acting and lim.max_steps is not None and self.actions >= lim.max_steps:
            return f"{LIMIT_PREFIX}max_steps={lim.max_steps} (action {self.actions + 1} refused)"
        if lim.max_tokens is not None and self.tokens() > lim.max_tokens:
            return f"{LIMIT_PREFIX}max_tokens={lim.max_tokens} ({self.tokens()} tokens used)"
        if self._deadline is not None and time.monotonic() >= self._deadline:
            what = "action" if acting else "model call"
            return f"{LIMIT_PREFIX}episode_timeout_s={lim.timeout_s:g} (the next {what} refused)"
        return None

    def tokens(self) -> int:
        """Tokens the endpoint reported so far in this episode."""
        events = self.tape.events
        for event in events[self._counted :]:
            if isinstance(event, LlmEvent):
                self._tokens += event_tokens(event)
        self._counted = len(events)
        return self._tokens
