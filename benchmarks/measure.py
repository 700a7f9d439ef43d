"""How every benchmark here measures: CPU time beside wall time, cases interleaved in
one run, medians of repeats, and a verdict only from a CPU-time ratio or a CPU-time
budget — never from a wall clock compared across moments.

Why: these machines are shared. Wall time moves with whatever else runs; the CPU
time a process (and the processes it started) spends on a piece of work barely does.
Two cases measured round-robin in the same run see the same load, so their ratio
holds whatever the load is. Every benchmark prints the load average it saw.

    from measure import interleaved, load_line, tree_cpu
    samples = interleaved({"base": f, "recorded": g}, repeats=5)
    print(load_line())
    print(ratio(samples["recorded"], samples["base"]))
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil


def tree_cpu() -> float:
    """CPU seconds (user + system) of this process (``time.process_time``: nanosecond
    clock), its waited-for children (``getrusage``: microseconds), and every live
    descendant (a fork pool's workers, Ray's raylet and workers, a CLI subprocess; read
    from /proc, in clock ticks)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time() + children.ru_utime + children.ru_stime
    for child in psutil.Process().children(recursive=True):
        try:
            c = child.cpu_times()
        except psutil.Error:  # exited between the listing and the read
            continue
        total += c.user + c.system
    return total


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float


def sample(fn: Callable[[], Any]) -> tuple[Sample, Any]:
    """Run ``fn`` once; its wall and CPU seconds (the process tree's), and its result."""
    cpu0, wall0 = tree_cpu(), time.perf_counter()
    out = fn()
    wall, cpu = time.perf_counter() - wall0, tree_cpu() - cpu0
    return Sample(wall, cpu), out


def interleaved(cases: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[Sample]]:
    """Each case ``repeats`` times, round-robin with the starting case rotated every
    round (ABC, BCA, CAB, …), so no case always runs first or after the same one."""
    names = list(cases)
    out: dict[str, list[Sample]] = {n: [] for n in names}
    for r in range(repeats):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            out[n].append(sample(cases[n])[0])
    return out


def run_process(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """One child process (``child_env``); a failure ends the benchmark in one line."""
    proc = subprocess.run(argv, capture_output=True, text=True, env=child_env())
    if proc.returncode != 0:
        error = (proc.stderr.strip().splitlines() or ["(no error output)"])[-1]
        raise SystemExit(f"Error: {' '.join(argv[1:])} exited {proc.returncode}: {error}")
    return proc


def processes_interleaved(cases: dict[str, list[str]], repeats: int) -> dict[str, list[Sample]]:
    """Each command line once to warm up (bytecode written, a store's pages read), then
    ``repeats`` interleaved rounds of them as fresh processes (see ``interleaved``)."""
    for argv in cases.values():
        run_process(argv)
    return interleaved({name: (lambda argv=argv: run_process(argv)) for name, argv in cases.items()}, repeats)


def median_cpu(samples: list[Sample]) -> float:
    return statistics.median(s.cpu for s in samples)


def median_wall(samples: list[Sample]) -> float:
    return statistics.median(s.wall for s in samples)


def ratio(a: list[Sample], b: list[Sample]) -> float:
    """The median of the per-round CPU ratios a/b (rounds paired: same load)."""
    return statistics.median(x.cpu / y.cpu for x, y in zip(a, b, strict=True) if y.cpu > 0)


def child_env() -> dict[str, str]:
    """The environment for a measured child process: this one's, with bytecode caching on
    (``PYTHONDONTWRITEBYTECODE`` dropped), as an installed program runs; a benchmark warms
    each command once so its modules are compiled before the timed rounds."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return (
        f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores (verdicts use CPU time)"
    )


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"
