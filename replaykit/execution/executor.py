"""The ``local`` executor kind: episodes of a panel are independent.

Workers record (or replay, or certify) episodes and return them; the caller (one
writer) persists them (the seam, the ``Executor`` protocol, is ``settings.py``'s).
``LocalExecutor`` runs them inline (``workers: 1``) or in a local fork pool; ``RayExecutor`` (:mod:`replaykit.execution.ray_executor`) runs them as Ray
tasks on many machines. ``select.make_executor`` picks one by ``executor.kind``.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, TypeVar

from pydantic import Field

from replaykit.execution.batching import batch_size, run_batch
from replaykit.execution.settings import ExecutorKind, ExecutorSettings

if TYPE_CHECKING:
    from replaykit.envs.base import NodeNeeds

J = TypeVar("J")
R = TypeVar("R")


def __getattr__(name: str) -> object:
    """``Executor`` moved to :mod:`replaykit.execution.settings` (a deprecated alias here)."""
    from replaykit.core.deprecation import moved_name

    return moved_name(__name__, name)


def capped_workers(workers: int, oversubscribe: bool = False) -> int:
    """``workers`` processes, at most one per core unless ``oversubscribe`` (episodes
    that mostly wait on a remote model or a container gain from more; CPU-bound ones,
    like the embedded default's, only lose: 8 workers on 2 cores ran 1.19x vs 1.8x at 2)."""
    workers = max(1, int(workers))
    cores = os.cpu_count() or 1
    if workers > cores and not oversubscribe:
        print(
            f"note: executor.workers {workers} is above this machine's {cores} cores; using {cores} "
            "(set executor.oversubscribe: true for episodes that wait on a remote model)",
            file=sys.stderr,
        )
        return cores
    return workers


class LocalExecutor:
    def __init__(self, workers: int = 1, oversubscribe: bool = False) -> None:
        self.workers = capped_workers(workers, oversubscribe)

    def map(self, fn: Callable[[J], R], jobs: Iterable[J], batch: bool = False) -> Iterator[tuple[J, R]]:
        """Yield ``(job, result)`` as each finishes; the first failure propagates."""
        jobs = list(jobs)
        if self.workers == 1 or len(jobs) <= 1:
            for job in jobs:
                yield job, fn(job)
            return
        size = batch_size(len(jobs), self.workers) if batch else 1
        # fork: workers need nothing of the parent but the job (an episode spec) and the code;
        # unlike spawn it works for scripts read from stdin or without a __main__ guard
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=get_context("fork")) as pool:
            futures = {
                pool.submit(run_batch, fn, jobs[i : i + size]): jobs[i : i + size]
                for i in range(0, len(jobs), size)
            }
            try:
                for future in as_completed(futures):
                    yield from zip(futures[future], future.result(), strict=True)
            finally:  # a failure (e.g. the model endpoint) stops the run: queued episodes never start
                for future in futures:
                    future.cancel()


class LocalSettings(ExecutorSettings):
    """The ``local`` kind's keys."""

    workers: int = Field(default=1, ge=1, description="Processes in the fork pool (1 = inline).")
    oversubscribe: bool = Field(
        default=False, description="Allow more workers than cores (I/O-bound episodes)."
    )

    def concurrency(self) -> int:
        return self.workers


def local_executor(settings: LocalSettings, needs: NodeNeeds) -> LocalExecutor:
    """The ``local`` executor kind: this machine only, so the env kind's node needs are moot."""
    return LocalExecutor(settings.workers, settings.oversubscribe)


LOCAL = ExecutorKind(local_executor, LocalSettings)
