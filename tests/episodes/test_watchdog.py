"""The watchdog stops a harness wherever it is once the episode's time is up (episodes/watchdog.py):
in the main thread (SIGALRM: a sleep is cut), in another thread (an asynchronous exception: a
Python loop is cut), never while an action runs, and never outside the harness."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from replaykit.capture.tape import Tape
from replaykit.cassette.events import LimitEvent
from replaykit.episodes.limits import Budget, EpisodeLimit, EpisodeLimits
from replaykit.episodes.watchdog import Watchdog


def drive(budget: Budget, harness: Callable[[], Any]) -> float:
    """Run ``harness`` under the watchdog as the rollout does; seconds until it stopped."""
    start = time.monotonic()
    with Watchdog(budget, drive.__code__):
        try:
            harness()
        except EpisodeLimit:
            pass
    return time.monotonic() - start


def budget(seconds: float) -> Budget:
    b = Budget(EpisodeLimits(timeout_s=seconds), Tape("t"))
    b.start()
    return b


def test_a_sleep_in_the_main_thread_is_cut_at_the_deadline() -> None:
    b = budget(0.5)
    took = drive(b, lambda: time.sleep(20))
    assert 0.4 < took < 3 and isinstance(b.hit, LimitEvent) and b.hit.limit == "episode_timeout_s"


def test_a_loop_in_another_thread_is_cut() -> None:
    b, took = budget(0.5), []

    def spin() -> None:
        while True:
            sum(range(100))

    thread = threading.Thread(target=lambda: took.append(drive(b, spin)), daemon=True)
    thread.start()
    thread.join(10)
    assert took and took[0] < 3


def test_an_action_running_is_never_cut() -> None:
    b = budget(0.3)

    def acts() -> None:
        with b.action():
            time.sleep(1.0)  # an action: it ends within its own timeout
        time.sleep(20)

    took = drive(b, acts)
    assert 0.9 < took < 3


def test_outside_the_harness_nothing_is_raised() -> None:
    b = budget(0.2)
    with Watchdog(b, drive.__code__):
        time.sleep(0.6)  # this frame is not the driver's: no harness below it
    assert b.hit is None


@pytest.mark.parametrize("seconds", [None])
def test_no_limit_no_timer(seconds: float | None) -> None:
    b = Budget(EpisodeLimits(timeout_s=seconds), Tape("t"))
    b.start()
    assert drive(b, lambda: time.sleep(0.3)) < 2 and b.hit is None
