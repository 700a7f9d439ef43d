"""Short jobs in batches: how many offline replays (a few ms each) go in one dispatch
to a pool worker or a Ray task, so the executor's per-dispatch cost is paid once per
batch. Long jobs (recording) are never batched."""

from __future__ import annotations

from typing import Callable, TypeVar

J = TypeVar("J")
R = TypeVar("R")


def batch_size(jobs: int, slots: int) -> int:
    """Jobs per dispatch for short jobs: about 8 dispatches per worker slot, at most 32 jobs each."""
    return max(1, min(32, jobs // (8 * max(1, slots))))


def run_batch(fn: Callable[[J], R], jobs: list[J]) -> list[R]:
    return [fn(job) for job in jobs]
