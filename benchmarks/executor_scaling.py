"""Benchmark: how episodes scale over workers (local fork pool and Ray).

(1) A 64-episode run (the quickstart panel, 8 tasks x 8 seeds, re-recorded each
time; ``--tasks`` fewer) inline, in the local pool and on a private Ray instance with 1, 2 and 4
workers, each round-robin with an inline run: the CPU time of the whole process
tree against inline's (what distributing costs: the verdict, <= 1.5x, holds at any
load) and the wall speed-up against the inline run beside it (information: it needs
idle cores), with the ideal (min(N, cores)).
(2) The scheduling itself: 64 sleep-bound jobs (each sleeps ``--sleep`` s) on 1..16
workers (the median of ``--repeats`` rounds, after Ray's lazily started workers are all
up; the local pool forks its workers inside each timed round). Sleeping jobs use no CPU,
so the CPU the process tree spends in a round (driver, pool or raylet and workers), less
its CPU in an idle period as long as the round right after it, is what scheduling costs. The target, speed-up >= 0.8 N on idle cores, holds when that
cost per job is at most a quarter of a job's sleep, shared by min(N, cores) cores:
<= 0.25 x sleep x min(1, cores / N) of CPU per job — the verdict, a CPU budget that the
load does not move. The wall speed-up against serial is printed beside it (information:
on a loaded machine the scheduling work waits for a core).

Each run's ``executor`` section is the kind's own (``kind: ray`` takes no ``workers``: typed
settings refuse another kind's key). ``tests/test_benchmarks.py`` runs both parts, Ray
included, at their smallest (``--tasks 1 --workers 1 --sleep-workers 1``).

Usage: python benchmarks/executor_scaling.py [--workers 1,2,4 (empty: skip part 1)] [--tasks 8] [--sleep-workers 1,2,4,8,16] [--sleep 0.5] [--repeats 3] [--no-ray]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import interleaved, load_line, median_cpu, median_wall, ratio, sample, verdict

JOBS = 64
#: the executor section of the inline runs (the quickstart's own: one worker, in this process)
INLINE: dict[str, Any] = {"kind": "local", "workers": 1}


class _Executor(Protocol):
    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[tuple[Any, Any]]: ...


def sleeper(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def sleeper_pid(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def warm(executor: _Executor, n: int) -> float:
    """Run rounds of N sleepers until one round ran on N distinct processes (Ray starts
    worker processes lazily, a couple at a time); return the time that took."""
    start = time.perf_counter()
    for _ in range(20):
        pids = {pid for _, pid in executor.map(sleeper_pid, [0.5] * n)}
        if len(pids) >= n:
            break
    return time.perf_counter() - start


def record_64(executor: dict[str, Any], tasks: list[str] | None = None) -> None:
    """The panel (``tasks``: all eight) x 8 seeds recorded again under ``executor``: the whole
    ``executor`` section (a kind's settings only: the quickstart's ``workers`` is the local
    kind's, refused under ``kind: ray``)."""
    from replaykit.episodes.run import measure
    from replaykit.testing import small_config

    with tempfile.TemporaryDirectory() as tmp:
        config = small_config(Path(tmp), tasks=tasks, seeds=list(range(8)), executor=executor)
        result = measure(config, record_mode="all")
        assert len(result.recorded) == 8 * len(config.panel.tasks), len(result.recorded)


def sleep_round(executor: _Executor, seconds: float, repeats: int) -> tuple[float, float]:
    """The median wall time of ``repeats`` rounds of JOBS sleepers, and the median CPU
    time the process tree spent scheduling them: a round's CPU less the CPU of an idle
    period as long as the round, right after it (Ray's raylet and idle workers poll, so
    their background CPU grows with the wall time, which the load stretches)."""
    walls, cpus = [], []
    for _ in range(repeats):
        took, done = sample(lambda: sum(1 for _ in executor.map(sleeper, [seconds] * JOBS)))
        assert done == JOBS
        idle, _ = sample(lambda wall=took.wall: time.sleep(wall))
        walls.append(took.wall)
        cpus.append(max(0.0, took.cpu - idle.cpu))
    return statistics.median(walls), statistics.median(cpus)


def _ray_restart(cpus: int) -> None:
    import ray

    from replaykit.execution.ray_executor import connect

    if ray.is_initialized():
        ray.shutdown()
    connect("local", num_cpus=cpus)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--sleep-workers", default="1,2,4,8,16")
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per size; the median is printed")
    parser.add_argument("--tasks", type=int, default=8, help="quickstart tasks in part 1's panel (x 8 seeds)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    sizes = [int(n) for n in args.workers.split(",") if n]

    print(load_line())
    if sizes:
        run_scaling(sizes, cores, ray=not args.no_ray, repeats=args.repeats, tasks=args.tasks)
    scheduling([int(x) for x in args.sleep_workers.split(",") if x], args, ray=not args.no_ray)


def run_scaling(sizes: list[int], cores: int, ray: bool, repeats: int, tasks: int = 8) -> None:
    from replaykit.testing import QUICKSTART_TASKS

    panel = list(QUICKSTART_TASKS[:tasks])
    print(f"(1) a {8 * len(panel)}-episode run ({len(panel)} quickstart tasks x 8 seeds) on {cores} cores")

    def record(executor: dict[str, Any]) -> None:
        record_64(executor, panel)

    record(INLINE)  # warm: imports, the harness tree
    variants: list[tuple[str, dict[str, Any], Any]] = [
        (f"local pool  {n:>2} workers", {"kind": "local", "workers": n, "oversubscribe": True}, None)
        for n in sizes
    ]
    if ray:
        variants += [(f"ray         {n:>2} workers", {"kind": "ray", "address": "local"}, n) for n in sizes]
    for label, executor, ray_cpus in variants:
        if ray_cpus is not None:
            _ray_restart(ray_cpus)
            record(executor)  # warm the workers
        samples = interleaved(
            {"inline": lambda: record(INLINE), "n": lambda executor=executor: record(executor)}, repeats
        )
        n = ray_cpus or executor["workers"]
        cpu_ratio = ratio(samples["n"], samples["inline"])
        print(
            f"    {label}  CPU {median_cpu(samples['n']):6.2f} s = {cpu_ratio:4.2f}x inline's "
            f"{median_cpu(samples['inline']):5.2f} s (<= 1.5x: {verdict(cpu_ratio <= 1.5)}); "
            f"wall speed-up {median_wall(samples['inline']) / median_wall(samples['n']):4.2f}x "
            f"(ideal {min(n, cores)}x on {cores} cores)"
        )


def scheduling(sizes: list[int], args: argparse.Namespace, ray: bool) -> None:
    from replaykit.execution.executor import LocalExecutor

    print(f"(2) scheduling: {JOBS} jobs sleeping {args.sleep} s each (serial: {JOBS * args.sleep:.1f} s)")
    kinds: list[tuple[str, Callable[[int], _Executor]]] = [
        ("local pool", lambda n: LocalExecutor(n, oversubscribe=True))
    ]
    if ray:
        from replaykit.execution.ray_executor import RayExecutor

        def on_ray(n: int) -> _Executor:
            _ray_restart(n)
            executor = RayExecutor("local")
            took = warm(executor, n)  # start all N worker processes before timing
            print(f"    ray        {n:>2} workers: {took:5.2f} s to start them (not timed below)")
            return executor

        kinds.append(("ray", on_ray))
    cores = os.cpu_count() or 1
    for label, make in kinds:
        for n in sizes:
            executor = make(n)
            took, cpu = sleep_round(executor, args.sleep, args.repeats)
            per_job, budget = cpu / JOBS, 0.25 * args.sleep * min(1.0, cores / n)
            speedup = JOBS * args.sleep / took
            print(
                f"    {label:<10} {n:>2} workers  CPU {1e3 * per_job:6.1f} ms per job "
                f"(<= {1e3 * budget:5.1f} ms: {verdict(per_job <= budget)}); "
                f"wall {took:6.2f} s, speed-up {speedup:5.2f}x ({speedup / n:.2f} of ideal {n}x)"
            )


if __name__ == "__main__":
    main()
