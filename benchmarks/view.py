"""Benchmark: ``replaykit view`` on a 10,000-episode store — the episode list's first page,
a filtered and sorted page, and a full-text search, over HTTP on loopback.

Each store gets its own ``replaykit view`` process; the CPU time of a request is the
viewer process's CPU (and this client's) while it is answered. Sizes are measured
round-robin in the same run, each sample a batch of ``--batch`` requests (CPU clocks tick
in 10 ms), and printed per request with the CPU ratio against the smallest store (the
baseline: how much a page grows with the store). The search index (an FTS5 sidecar
built lazily from the first search on, in a background thread) is timed once per store,
until every episode is searchable. Budget (the issue's): every
page and every indexed search under 1 s of CPU per request, and under 1 s of wall.

Usage: python benchmarks/view.py [--sizes 100,10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Sample, load_line, median_cpu, median_wall, ratio, verdict
from store_listing import fill

WORD = "edsger"  # in a tool output of csv-active-emails (the quickstart panel)


class Viewer:
    def __init__(self, store: Path, cache: Path) -> None:
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "replaykit.cli",
                "view",
                "--store",
                str(store),
                "--port",
                "0",
                "--no-open",
                "--json",
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        lines = []
        while not lines or not lines[-1].startswith("}"):
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("replaykit view did not start")
            lines.append(line)
        self.url = json.loads("".join(lines))["url"].rstrip("/")
        self.ps = psutil.Process(self.proc.pid)

    def cpu(self) -> float:
        t = self.ps.cpu_times()
        return t.user + t.system

    def get(self, path: str, times: int = 1) -> Sample:
        """``times`` requests: wall and CPU time (the viewer's plus this client's) per request."""
        import time

        cpu0, mine0, wall0 = self.cpu(), time.process_time(), time.perf_counter()
        for _ in range(times):
            with urllib.request.urlopen(self.url + path, timeout=600) as answer:
                body = answer.read()
            assert answer.status == 200 and body
        wall = time.perf_counter() - wall0
        return Sample(wall / times, (self.cpu() - cpu0 + time.process_time() - mine0) / times)

    def build_index(self, path: str) -> Sample:
        """Search until the page no longer says it is indexing (the sidecar is built in the
        viewer's background thread, each search waiting a few seconds for it): the build's
        CPU time in the viewer and the wall time until every episode is searchable."""
        import time

        cpu0, wall0 = self.cpu(), time.perf_counter()
        while True:
            with urllib.request.urlopen(self.url + path, timeout=600) as answer:
                if b'id="indexing"' not in answer.read():
                    break
        return Sample(time.perf_counter() - wall0, self.cpu() - cpu0)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,10000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args()
    from replaykit.cassette.store import Store
    from replaykit.episodes.run import measure
    from replaykit.testing import small_config

    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "source").mkdir()
        config = small_config(Path(tmp) / "source")
        run = measure(config).run
        source = Store(config.store_path)
        episodes = [source.get_episode(c) for c in run["cassettes"]]
        viewers: dict[int, Viewer] = {}
        print(load_line())
        print("replaykit view (HTTP on loopback; CPU time of the viewer + client, wall in brackets)")
        try:
            for size in sizes:
                store_dir = Path(tmp) / f"store-{size}"
                store = Store(store_dir)
                store.put_tree(run["harness_sha"], source.get_tree(run["harness_sha"]))
                fill(store, episodes, size)
                store.put_run(run)
                store.driver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # SQLite: the WAL into index.db
                store.close()
                viewers[size] = Viewer(store_dir, Path(tmp) / f"cache-{size}")
                viewers[size].get("/")  # templates compiled, store opened
            builds = {size: v.build_index(f"/search?q={WORD}") for size, v in viewers.items()}
            for size, s in builds.items():
                print(
                    f"    search index built from the first search on, {size:>6} episodes: {s.cpu:6.2f} s ({s.wall:6.2f})"
                )
            pages = {
                "first page": "/episodes",
                "filtered, sorted": "/episodes?task=hello-file&outcome=pass&sort=tokens&dir=asc&page=2",
                "search": f"/search?q={WORD}",
            }
            cases = {
                f"{name}@{size}": (lambda v=v, p=path: v.get(p, args.batch))
                for name, path in pages.items()
                for size, v in viewers.items()
            }
            names = list(cases)
            samples: dict[str, list[Sample]] = {n: [] for n in names}
            for r in range(args.repeats):  # round-robin, the starting case rotated (as measure.interleaved)
                for n in names[r % len(names) :] + names[: r % len(names)]:
                    samples[n].append(cases[n]())  # the request's own figures: the viewer's CPU, not ours
            base = sizes[0]
            ok_all = True
            for name in pages:
                for size in sizes:
                    got = samples[f"{name}@{size}"]
                    r = ratio(got, samples[f"{name}@{base}"])
                    ok = median_cpu(got) < 1 and median_wall(got) < 1
                    ok_all &= ok
                    print(
                        f"    {name:<17} {size:>6} episodes: {median_cpu(got):5.3f} s ({median_wall(got):5.3f})"
                        f"  {r:5.2f}x the {base}-episode store's CPU  [< 1 s: {verdict(ok)}]"
                    )
            print(f"all budgets: {verdict(ok_all)}")
        finally:
            for v in viewers.values():
                v.stop()


if __name__ == "__main__":
    main()
