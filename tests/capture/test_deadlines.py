"""The per-call deadlines thread: deadlines fire on time, and arming the usual (late)
deadline of a call costs no thread wake-up, even after the previous call's was cancelled."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from replaykit.capture.deadlines import Deadlines

pytestmark = pytest.mark.unit


def _counting_waits(deadlines: Deadlines) -> list[int]:
    """Counts the thread's waits on its condition (each one follows a wake-up)."""
    waits = [0]
    cond = deadlines._cond
    real_wait = cond.wait

    def wait(timeout: float | None = None) -> Any:
        waits[0] += 1
        return real_wait(timeout)

    cond.wait = wait  # type: ignore[method-assign]
    return waits


def test_a_deadline_fires_and_a_cancelled_one_does_not() -> None:
    deadlines = Deadlines()
    fired, cancelled = threading.Event(), threading.Event()
    deadlines.cancel(deadlines.arm(time.monotonic() + 0.05, cancelled.set))
    deadlines.arm(time.monotonic() + 0.1, fired.set)
    assert fired.wait(5)
    assert not cancelled.is_set()


def test_an_earlier_deadline_armed_after_a_later_one_wakes_the_thread() -> None:
    deadlines = Deadlines()
    late, early = threading.Event(), threading.Event()
    deadlines.arm(time.monotonic() + 60, late.set)
    time.sleep(0.05)  # the thread now sleeps until the late deadline
    start = time.monotonic()
    deadlines.arm(time.monotonic() + 0.05, early.set)
    assert early.wait(5)
    assert time.monotonic() - start < 5
    assert not late.is_set()


def test_calls_armed_and_cancelled_in_turn_do_not_wake_the_thread_each_time() -> None:
    """The recorder arms a 120 s deadline per call and cancels it when the body is read;
    the thread must keep sleeping (a wake-up per call cost more than the rest of the
    recorder's own work for a call)."""
    deadlines = Deadlines()
    deadlines.cancel(deadlines.arm(time.monotonic() + 120, lambda: None))  # starts the thread
    time.sleep(0.05)
    waits = _counting_waits(deadlines)
    for _ in range(40):
        deadlines.cancel(deadlines.arm(time.monotonic() + 120, lambda: None))
        time.sleep(0.002)  # the thread gets the chance to run between calls
    assert waits[0] <= 2, f"the deadlines thread woke {waits[0]} times for 40 calls"
    fired = threading.Event()
    deadlines.arm(time.monotonic() + 0.05, fired.set)  # and it still keeps an earlier deadline
    assert fired.wait(5)
