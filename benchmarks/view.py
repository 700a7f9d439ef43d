"""Benchmark: ``replaykit view`` as the store grows to 100,000 episodes — the episode list's
first page, a filtered and sorted page, and a full-text search, over HTTP on loopback.

Each store gets its own ``replaykit view`` process; the CPU time of a request is the
viewer process's CPU (and this client's) while it is answered. Every case is measured
round-robin in the same run, each sample a batch of ``--batch`` requests (CPU clocks tick
in 10 ms), and printed per request beside two ratios of the same rounds: against the
smallest store (how much a page grows with the store) and against a *baseline request*,
``/api/token`` on the same viewer (the HTTP round trip, the host check and one store
query: the least a request costs). Every seed in the stores is distinct (the worst case for
the seed filter's values). The search index (an FTS5 sidecar built lazily from the first
search on, in a background thread) is built and timed for stores of at most
``--search-max`` episodes (it reads every episode once); then a search of the unchanged
store lists nothing (the index keeps the store's change token).

Verdicts are CPU ratios (issue 39 item 9: no absolute CPU or wall budget; the load moves
those): the first page at the largest store within 1.5x the smallest store's; every page
within ``PAGE_LIMIT`` baseline requests; an indexed search at the largest store within
``SEARCH_LIMIT`` baseline requests (issue 39 item 7's 0.05 s of CPU per query, in this
machine's baseline requests of ~1 ms).

Usage: python benchmarks/view.py [--sizes 1000,100000] [--repeats 5] [--search-max 100000]
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
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Sample, load_line, median_cpu, median_wall, ratio, verdict
from store_listing import fill

WORD = "edsger"  # in a tool output of csv-active-emails (the quickstart panel)
BASELINE = "/api/token"
#: the most baseline requests a page may cost (the first page, a filtered one, a search): issue
#: 30's 0.1 s of CPU in this machine's baseline requests (~1 ms)
PAGE_LIMIT = 100
#: the most baseline requests a search of the largest indexed store may cost: issue 39's
#: 0.05 s of CPU per query in this machine's baseline requests (~1 ms)
SEARCH_LIMIT = 50


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


def serve_store(tmp: Path, size: int, run: Any, source: Any, episodes: list[Any]) -> Viewer:
    """A store of ``size`` episodes (copies of the panel's) and a viewer over it, warmed up."""
    from replaykit.cassette.store import Store

    store_dir = tmp / f"store-{size}"
    store = Store(store_dir)
    store.put_tree(run.harness_sha, source.get_tree(run.harness_sha))
    fill(store, episodes, size)
    store.put_run(run)
    store.driver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # SQLite: the WAL into index.db
    store.close()
    viewer = Viewer(store_dir, tmp / f"cache-{size}")
    viewer.get("/")  # templates compiled, store opened
    return viewer


def report(
    pages: dict[str, str], sized: dict[str, list[int]], samples: dict[str, list[Sample]], sizes: list[int]
) -> None:
    """Each page's CPU per request by store size, against the smallest store's and against the
    baseline request on the same viewer, and the verdicts (ratios only)."""
    ok_all = True
    for size in sizes:
        base = samples[f"baseline@{size}"]
        print(
            f"    {'baseline ' + BASELINE:<19} {size:>6} episodes: {median_cpu(base):5.3f} s ({median_wall(base):5.3f})"
        )
    for name in pages:
        for size in sized[name]:
            first = sized[name][0]
            got = samples[f"{name}@{size}"]
            grows, over = ratio(got, samples[f"{name}@{first}"]), ratio(got, samples[f"baseline@{size}"])
            ok = over <= PAGE_LIMIT
            ok_all &= ok
            print(
                f"    {name:<19} {size:>6} episodes: {median_cpu(got):5.3f} s ({median_wall(got):5.3f})"
                f"  {grows:5.2f}x the {first}-episode store's, {over:5.1f}x the baseline"
                f"  [<= {PAGE_LIMIT}x: {verdict(ok)}]"
            )
    top = samples[f"first page@{sizes[-1]}"]
    flat = ratio(top, samples[f"first page@{sizes[0]}"])
    ok_all &= flat <= 1.5
    print(
        f"first page at {sizes[-1]} episodes: {flat:4.2f}x the {sizes[0]}-episode store's CPU"
        f"  [<= 1.5x: {verdict(flat <= 1.5)}]"
    )
    if sized["search"]:
        largest = sized["search"][-1]
        over = ratio(samples[f"search@{largest}"], samples[f"baseline@{largest}"])
        ok_all &= over <= SEARCH_LIMIT
        print(
            f"search at {largest} episodes, indexed, store unchanged: {median_cpu(samples[f'search@{largest}']):5.3f} s"
            f" CPU per query, {over:4.1f}x the baseline request  [<= {SEARCH_LIMIT}x: {verdict(over <= SEARCH_LIMIT)}]"
        )
    print(f"all verdicts: {verdict(ok_all)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--search-max", type=int, default=100000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=20)
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
        episodes = [source.get_episode(c) for c in run.cassettes]
        viewers: dict[int, Viewer] = {}
        print(load_line())
        print("replaykit view (HTTP on loopback; CPU time of the viewer + client, wall in brackets)")
        try:
            for size in sizes:
                viewers[size] = serve_store(Path(tmp), size, run, source, episodes)
            builds = {
                size: v.build_index(f"/search?q={WORD}")
                for size, v in viewers.items()
                if size <= args.search_max
            }
            for size, s in builds.items():
                print(
                    f"    search index built from the first search on, {size:>6} episodes: {s.cpu:6.2f} s ({s.wall:6.2f})"
                )
            pages = {
                "first page": "/episodes",
                "filtered, sorted": "/episodes?task=hello-file&outcome=pass&sort=tokens&dir=asc&page=2",
                "search": f"/search?q={WORD}",
            }
            sized = {name: [s for s in sizes if name != "search" or s in builds] for name in pages}
            cases = {
                f"{name}@{size}": (lambda v=viewers[size], p=path: v.get(p, args.batch))
                for name, path in {"baseline": BASELINE, **pages}.items()
                for size in (sizes if name == "baseline" else sized[name])
            }
            names = list(cases)
            samples: dict[str, list[Sample]] = {n: [] for n in names}
            for r in range(args.repeats):  # round-robin, the starting case rotated (as measure.interleaved)
                for n in names[r % len(names) :] + names[: r % len(names)]:
                    samples[n].append(cases[n]())  # the request's own figures: the viewer's CPU, not ours
            report(pages, sized, samples, sizes)
        finally:
            for v in viewers.values():
                v.stop()


if __name__ == "__main__":
    main()
