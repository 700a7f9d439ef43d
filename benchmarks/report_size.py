"""Benchmark: a report (and a transcript) of an episode with one huge command output.

Records one quickstart episode, then gives one of its steps a stdout of ``--mb``
megabytes (the episode re-stored whole, its run document updated: a consistent store),
and writes the run's HTML report through the real CLI, interleaved with the report of
the same run before the output grew (the baseline). Prints the report sizes, the peak
RSS of each ``replaykit report`` process and their CPU times, and judges: the report
under 5 MB and the process under 200 MB RSS (each output is capped, the rest counted).
Usage: python benchmarks/report_size.py [--mb 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from replaykit.cassette.events import EnvEvent, Episode
from replaykit.cassette.store import Store
from replaykit.episodes.run import measure
from replaykit.testing import small_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import load_line, verdict

SIZE_LIMIT = 5 * 1024 * 1024
RSS_LIMIT_MB = 200.0


def inflate(store: Store, run_id: str, mb: int) -> int:
    """Give the first step of the run's first episode a stdout of ``mb`` MB; return its size."""
    run = store.get_run(run_id)
    cid = run.cassettes[0]
    episode = store.get_episode(cid)
    line = "0123456789abcdef" * 6 + "\n"  # 97 bytes a line
    big = line * (mb * 1024 * 1024 // len(line))
    events = list(episode.events)
    i = next(i for i, e in enumerate(events) if isinstance(e, EnvEvent))
    step = events[i]
    assert isinstance(step, EnvEvent)
    events[i] = dataclasses.replace(step, observation=dataclasses.replace(step.observation, stdout=big))
    grown = Episode(key=episode.key, events=events, meta=episode.meta)
    store.put_episode(grown)
    rows = [e.replaced(digest=grown.digest) if e.cassette_id == cid else e for e in run.episodes]
    store.put_run(run.replaced(episodes=rows))
    return len(big)


def _hwm_mb(pid: int) -> float:
    """The process's peak RSS so far (VmHWM; reset at exec, unlike getrusage's ru_maxrss,
    which a child inherits from this large parent)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def report(store: Path, run_id: str, out: Path) -> tuple[float, float, int]:
    """(CPU seconds, peak RSS in MB, bytes written) of one ``replaykit report`` process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "replaykit.cli", "report", run_id, "--store", str(store), "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peak = 0.0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _hwm_mb(proc.pid))
        time.sleep(0.01)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"replaykit report {run_id} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, peak, out.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = small_config(root, tasks=["hello-file"], seeds=[0])
        run_id = measure(config).run.run_id
        base, big = root / "base", root / "big"
        shutil.copytree(config.store_path, base)
        shutil.copytree(config.store_path, big)
        size = inflate(Store(big), run_id, args.mb)
        figures: dict[str, list[tuple[float, float, int]]] = {"baseline": [], "huge output": []}
        for _ in range(args.repeats):  # interleaved: both cases see the same load
            figures["baseline"].append(report(base, run_id, root / "base.html"))
            figures["huge output"].append(report(big, run_id, root / "big.html"))
        print(load_line())
        print(f"one step's stdout: {size / 1e6:.1f} MB")
        for name, rows in figures.items():
            cpu = sorted(r[0] for r in rows)[len(rows) // 2]
            rss = max(r[1] for r in rows)
            print(
                f"{name:>12}: report {rows[-1][2] / 1e6:6.2f} MB, peak RSS {rss:6.1f} MB, CPU {cpu:5.2f} s (median)"
            )
        size_ok = figures["huge output"][-1][2] < SIZE_LIMIT
        rss_ok = max(r[1] for r in figures["huge output"]) < RSS_LIMIT_MB
        cpu_ratio = sorted(r[0] for r in figures["huge output"])[args.repeats // 2] / max(
            sorted(r[0] for r in figures["baseline"])[args.repeats // 2], 1e-9
        )
        print(f"CPU ratio huge/baseline: {cpu_ratio:.2f}x (information)")
        print(
            f"report under {SIZE_LIMIT // (1024 * 1024)} MB: {verdict(size_ok)}; "
            f"peak RSS under {RSS_LIMIT_MB:.0f} MB: {verdict(rss_ok)}"
        )
        if not (size_ok and rss_ok):
            raise SystemExit(1)


if __name__ == "__main__":
    main()
