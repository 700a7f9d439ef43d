"""The executor seam: episodes of a panel are independent.

Workers record episodes and return them; the caller (one writer) persists them.
``LocalExecutor`` runs them inline (``workers: 1``) or in a local process pool; a
Ray executor for many machines would implement the same ``map``.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import Callable, Iterable, Iterator, Protocol, TypeVar

J = TypeVar("J")
R = TypeVar("R")


class Executor(Protocol):
    def map(self, fn: Callable[[J], R], jobs: Iterable[J]) -> Iterator[tuple[J, R]]: ...


class LocalExecutor:
    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, int(workers))

    def map(self, fn: Callable[[J], R], jobs: Iterable[J]) -> Iterator[tuple[J, R]]:
        """Yield ``(job, result)`` as each finishes; the first failure propagates."""
        jobs = list(jobs)
        if self.workers == 1 or len(jobs) <= 1:
            for job in jobs:
                yield job, fn(job)
            return
        # fork: workers need nothing of the parent but the job (an episode spec) and the code;
        # unlike spawn it works for scripts read from stdin or without a __main__ guard
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=get_context("fork")) as pool:
            futures = {pool.submit(fn, job): job for job in jobs}
            for future in as_completed(futures):
                yield futures[future], future.result()
