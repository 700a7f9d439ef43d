"""The environment behind a harness's ``env``: a real one behind a recording tape, or the tape alone.

A harness is handed a :class:`HarnessEnv` — ``run``, ``unusable`` and ``kind``, nothing else — so
the environment itself (whose ``run`` is not recorded), the tape and the episode's
:class:`~replaykit.episodes.limits.Budget` are no attributes of what it holds, and nothing can be
set on it (``env.budget.actions = 0`` is an ``AttributeError``). The budget counts the actions
the tape recorded, and every read of a cassette holds its actions to its recorded limits
(``cassette/outcomes.py``), so a harness that reached past this by introspection would still
record no more than its limits allow, or fail ``cassettes verify``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from replaykit.capture.tape import Tape
from replaykit.cassette.events import EnvEvent, NetEvent
from replaykit.core.determinism import sha256_hex
from replaykit.core.errors import EnvError
from replaykit.envs.base import Environment
from replaykit.envs.extras import NetworkedEnvironment
from replaykit.envs.results import Observation
from replaykit.episodes.limits import Budget, EpisodeLimits

P = ParamSpec("P")
R = TypeVar("R")


class TapedEnv:
    """The rollout's side of an episode's environment (never handed to a harness: :meth:`view`)."""

    def __init__(self, tape: Tape, inner: Environment | None, budget: Budget | None = None) -> None:
        self.tape = tape
        self.inner = inner
        self.budget = budget or Budget(EpisodeLimits(), tape)  # checked before every action
        self.kind = inner.kind if inner else "replay"
        self.env_error: str | None = (
            None  # an environment failure during an action: the episode's infra failure
        )

    @property
    def actions(self) -> int:
        """Actions recorded so far (what the tape holds)."""
        return sum(1 for e in self.tape.events if isinstance(e, EnvEvent))

    def view(self) -> HarnessEnv:
        """What the harness is handed as ``env``."""
        return HarnessEnv(self.run, self.unusable, self.kind)

    def run(self, command: str, timeout_sec: float | None = None) -> Observation:
        with self.budget.action():  # never cut in two by the watchdog (watchdog.py)
            return self._run(command, timeout_sec)

    def _run(self, command: str, timeout_sec: float | None) -> Observation:
        self.budget.check(acting=True)
        if self.tape.replaying:
            return self.tape.play_env(command).observation
        assert self.inner is not None
        scrub = self.tape.scrubber
        try:
            obs = self.inner.run(command, self.budget.action_timeout(timeout_sec))
            data = getattr(self.inner, "snapshot_bytes", lambda: None)()  # full snapshot, when asked for
            state = self.inner.state_digest()
        except EnvError as exc:  # recorded as the action's outcome, so a replay sees the same
            self.env_error = self.env_error or str(exc)
            obs, data, state = (
                Observation("", f"[replaykit: environment error: {exc}]\n", 125),
                None,
                "env-error",
            )
        snapshot = sha256_hex(data) if data is not None else None
        # stored scrubbed (``echo $KEY`` in an action); the harness gets the real output
        stored = dataclasses.replace(obs, stdout=scrub.text(obs.stdout), stderr=scrub.text(obs.stderr))
        event = EnvEvent(
            action=scrub.text(command),
            observation=stored,
            state_digest=state,
            snapshot=snapshot,
            snapshot_data=data,
        )
        self.tape.record(event)
        self.record_network()
        return obs

    def unusable(self, reason: str) -> None:
        """The harness found this environment unfit to work in (a program it drives is missing):
        the episode ends as an infrastructure failure with ``reason`` as its line, never graded.
        A replay serves the recorded grade, so there it changes nothing."""
        self.env_error = self.env_error or reason

    def record_network(self) -> None:
        """What the environment fetched since the last call (its kind records it), as events."""
        if not isinstance(self.inner, NetworkedEnvironment):
            return
        for record in self.inner.network_exchanges():
            self.tape.record(NetEvent.from_record(record))


class HarnessEnv:
    """A harness's ``env``: ``run(command, timeout_sec=None)`` (a recorded, counted action),
    ``unusable(reason)`` and ``kind``; nothing else is reachable or settable through it."""

    __slots__ = ("_kind", "_run", "_unusable")

    def __init__(
        self,
        run: Callable[[str, float | None], Observation],
        unusable: Callable[[str], None],
        kind: str,
    ) -> None:
        self._run, self._unusable, self._kind = _closed(run), _closed(unusable), kind

    @property
    def kind(self) -> str:
        return self._kind

    def run(self, command: str, timeout_sec: float | None = None) -> Observation:
        """Run ``command`` (bash) in the task's sandbox: a recorded step."""
        return self._run(command, timeout_sec)

    def unusable(self, reason: str) -> None:
        """The sandbox lacks what the harness needs: the episode is an infrastructure failure."""
        self._unusable(reason)

    def __repr__(self) -> str:
        return f"<replaykit env kind={self._kind!r}>"


def _closed(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` behind a plain function (a bound method would hand out its object as ``__self__``)."""

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return method(*args, **kwargs)

    return call
