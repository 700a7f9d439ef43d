"""The episode's clock, enforced wherever the harness is: a harness that sleeps, spins or waits
between its calls past ``limits.episode_timeout_s`` is interrupted there.

While ``solve`` runs, a :class:`Watchdog` arms a timer for the episode's deadline (its
:class:`~replaykit.episodes.limits.Budget`'s). When it fires, the harness is stopped with
:class:`~replaykit.episodes.limits.EpisodeLimit` raised where it is (a ``time.sleep``, a loop, a
wait on a socket), the budget keeps the ``limit`` event and every later call is refused; it fires
again every :data:`REPEAT_S` while the harness goes on (one that swallows ``BaseException``).

It never interrupts the framework mid-record: while an action runs (``TapedEnv.run``, bounded
by the time left itself, from any thread: ``Budget.acting``), while the tape appends an event,
or before the harness was entered or after it returned, it waits for the next tick. A replay
arms it too, with the recorded timeout, and stops the harness only where the recording was
stopped (the next recorded event is that limit), so a replay never waits out a sleep the
recording cut short.

In the main thread it is ``SIGALRM`` (``setitimer``), which interrupts blocking calls; in another
thread (a library caller's) it is an asynchronous exception, which takes effect when the
harness next runs Python code (a blocking C call ends first).
"""

from __future__ import annotations

import ctypes
import signal
import sys
import threading
import time
from types import CodeType, FrameType, TracebackType
from typing import Any

from replaykit.capture.tape import Tape
from replaykit.episodes.limits import Budget, EpisodeLimit

#: seconds between firings once the deadline passed (the harness did not stop, or it was not
#: interruptible at that moment)
REPEAT_S = 0.25
#: framework code an interruption must not cut in two
_PROTECTED: set[CodeType] = {Tape.record.__code__, Tape.play_limit.__code__}


def protect(code: CodeType) -> None:
    """Never interrupt while ``code`` runs (a frame of it is on the harness thread's stack)."""
    _PROTECTED.add(code)


class Watchdog:
    """``with Watchdog(budget, driver):`` around one run of the harness. ``driver``: the code of
    the function that calls the harness (an interruption there, outside the harness, waits)."""

    def __init__(self, budget: Budget, driver: CodeType) -> None:
        self.budget, self.driver = budget, driver
        self.armed = False
        self._thread = threading.current_thread()
        self._previous: Any = None
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Watchdog:
        deadline = self.budget.deadline
        if deadline is None:
            return self
        self.armed = True
        delay = max(deadline - time.monotonic(), 0.001)
        if self._thread is threading.main_thread() and hasattr(signal, "setitimer"):
            self._previous = signal.signal(signal.SIGALRM, self._on_signal)
            signal.setitimer(signal.ITIMER_REAL, delay, REPEAT_S)
        else:
            self._schedule(delay)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.armed:
            return
        self.armed = False
        if self._timer is not None:
            self._timer.cancel()
        else:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, self._previous)

    def _due(self, frame: FrameType | None) -> bool:
        """The deadline passed and the harness may be stopped where ``frame`` is."""
        if not self.armed or self.budget.acting:
            return False
        if frame is None or frame.f_code is self.driver:  # not inside the harness
            return False
        while frame is not None:
            if frame.f_code in _PROTECTED:
                return False
            if frame.f_code is self.driver:
                return self.budget.expire()
            frame = frame.f_back
        return False  # the harness is not on this stack (it returned)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._due(frame):
            raise EpisodeLimit(self.budget.message())

    def _schedule(self, delay: float) -> None:
        self._timer = threading.Timer(delay, self._on_timer)
        self._timer.daemon = True
        self._timer.start()

    def _on_timer(self) -> None:
        if not self.armed:
            return
        ident = self._thread.ident
        if ident is not None and self._due(sys._current_frames().get(ident)):
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(EpisodeLimit))
        self._schedule(REPEAT_S)


_PROTECTED |= {Watchdog.__enter__.__code__, Watchdog.__exit__.__code__}  # arming and disarming itself
