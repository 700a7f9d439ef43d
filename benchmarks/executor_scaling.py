"""Benchmark: how episodes scale over workers (local fork pool and Ray).

(1) A 64-episode run (the quickstart panel, 8 tasks x 8 seeds, re-recorded each
time) inline, in the local pool and on a private Ray instance with 1, 2 and 4
workers: wall time and speed-up against inline, with the ideal (min(N, cores)).
(2) The scheduling itself, without CPU contention: 64 sleep-bound jobs (each sleeps
``--sleep`` s) on 1..16 workers; speed-up against one worker should stay >= 0.8 N.

Usage: python benchmarks/executor_scaling.py [--workers 1,2,4] [--sleep-workers 1,2,4,8,16] [--sleep 0.5] [--no-ray]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

JOBS = 64


class _Executor(Protocol):
    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[tuple[Any, Any]]: ...


def sleeper(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def record_64(executor: dict[str, Any]) -> float:
    from replaykit.run import measure
    from replaykit.testing import small_config

    with tempfile.TemporaryDirectory() as tmp:
        config = small_config(
            Path(tmp), seeds=list(range(8)), **{f"executor.{k}": v for k, v in executor.items()}
        )
        start = time.perf_counter()
        result = measure(config, record_mode="all")
        took = time.perf_counter() - start
        assert len(result.recorded) == JOBS, len(result.recorded)
    return took


def sleep_round(executor: _Executor, seconds: float) -> float:
    start = time.perf_counter()
    done = sum(1 for _ in executor.map(sleeper, [seconds] * JOBS))
    assert done == JOBS
    return time.perf_counter() - start


def _ray_restart(cpus: int) -> None:
    import ray

    from replaykit.ray_executor import connect

    if ray.is_initialized():
        ray.shutdown()
    connect("local", num_cpus=cpus)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--sleep-workers", default="1,2,4,8,16")
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    sizes = [int(n) for n in args.workers.split(",")]

    print(f"(1) a {JOBS}-episode run (quickstart panel x 8 seeds) on {cores} cores")
    inline = record_64({})
    print(f"    inline              {inline:6.2f} s")
    for n in sizes:
        pooled = record_64({"workers": n, "oversubscribe": True})
        print(
            f"    local pool  {n:>2} workers {pooled:6.2f} s  speed-up {inline / pooled:4.2f}x  (ideal {min(n, cores)}x on {cores} cores)"
        )
    if not args.no_ray:
        for n in sizes:
            _ray_restart(n)
            record_64({"kind": "ray", "address": "local"})  # warm the workers
            on_ray = record_64({"kind": "ray", "address": "local"})
            print(
                f"    ray         {n:>2} workers {on_ray:6.2f} s  speed-up {inline / on_ray:4.2f}x  (ideal {min(n, cores)}x on {cores} cores)"
            )

    from replaykit.executor import LocalExecutor

    print(f"(2) scheduling: {JOBS} jobs sleeping {args.sleep} s each (serial: {JOBS * args.sleep:.1f} s)")
    kinds: list[tuple[str, Callable[[int], _Executor]]] = [
        ("local pool", lambda n: LocalExecutor(n, oversubscribe=True))
    ]
    if not args.no_ray:
        from replaykit.ray_executor import RayExecutor

        def on_ray(n: int) -> _Executor:
            _ray_restart(n)
            executor = RayExecutor("local")
            for _ in executor.map(sleeper, [1.0] * n):  # start all N worker processes before timing
                pass
            return executor

        kinds.append(("ray", on_ray))
    for label, make in kinds:
        for n in [int(x) for x in args.sleep_workers.split(",")]:
            executor = make(n)
            took = sleep_round(executor, args.sleep)
            speedup = JOBS * args.sleep / took
            verdict = "ok" if speedup >= 0.8 * n else "below 0.8 N"
            print(
                f"    {label:<10} {n:>2} workers {took:6.2f} s  speed-up {speedup:5.2f}x  (ideal {n}x; {speedup / n:.2f} of ideal: {verdict})"
            )


if __name__ == "__main__":
    main()
