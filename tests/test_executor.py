"""The executor seam: episodes recorded in a process pool equal those recorded inline."""

from __future__ import annotations

from pathlib import Path

from replaykit.episodes.run import measure
from replaykit.testing import small_config

TASKS = ["hello-file", "fix-config-port", "count-error-lines"]


def test_pool_records_the_same_episodes_as_inline(tmp_path: Path) -> None:
    (tmp_path / "pool").mkdir()
    (tmp_path / "inline").mkdir()
    pooled = measure(small_config(tmp_path / "pool", TASKS, None, **{"executor.workers": 2}))
    inline = measure(small_config(tmp_path / "inline", TASKS, None, **{"executor.workers": 1}))
    assert len(pooled.recorded) == len(inline.recorded) == 6
    assert pooled.run.run_id == inline.run.run_id
    assert [e.digest for e in pooled.run.episodes] == [e.digest for e in inline.run.episodes]


def _pid_of(job: int) -> tuple[int, int]:
    import os

    return job, os.getpid()


def test_pool_batches_short_jobs_and_pairs_every_result_with_its_job() -> None:
    from replaykit.execution.batching import batch_size
    from replaykit.execution.executor import LocalExecutor

    assert batch_size(100, 2) == 6 and batch_size(10, 2) == 1 and batch_size(10_000, 2) == 32
    jobs = list(range(100))
    results = list(LocalExecutor(2, oversubscribe=True).map(_pid_of, jobs, batch=True))
    assert sorted(job for job, _ in results) == jobs  # each job once
    assert all(job == echoed for job, (echoed, _) in results)  # paired with its own result
    # batches of 6: jobs 0..5 ran in one dispatch, so in one worker process
    assert len({pid for job, (_, pid) in results if job < 6}) == 1
