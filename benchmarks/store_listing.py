"""Benchmark: listing commands and store size as the store grows.

(d) ``replaykit cassettes ls``, ``runs`` and ``cassettes show`` (the real CLI, a
fresh process each, so Python start-up is included; the median of three, CPU time of the
child process beside its wall time) on stores of 100 and 10,000 episodes: CPU time
should stay flat (ratio to the first size's <= 1.5) and each command under a second.
(e) Stored bytes per episode, with each episode's ``meta`` (pins, versions, task,
environment) deduplicated, and what it would be with ``meta`` inline in every
document (cassette format 1).

The stores are filled with copies of a recorded quickstart panel under new keys
(different seeds), in one transaction per thousand episodes.

Usage: python benchmarks/store_listing.py [--sizes 100,10000]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from replaykit.cassette.codec import encode_episode
from replaykit.cassette.events import Episode
from replaykit.cassette.store import Store
from replaykit.core.determinism import canonical_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Sample, load_line, sample, verdict


def fill(store: Store, episodes: list[Episode], total: int) -> None:
    for i in range(total):
        source = episodes[i % len(episodes)]
        key = dataclasses.replace(source.key, seed=1000 + i)
        store.put_episode(Episode(key, source.events, dict(source.meta, seed=key.seed)))


def cli(*args: str, repeats: int = 3) -> Sample:
    """The median CPU and wall time of ``repeats`` runs of the real CLI; a failing run
    ends the benchmark with the command and its error line (exit 1)."""
    runs = []
    for _ in range(repeats):
        took, proc = sample(
            lambda: subprocess.run(
                [sys.executable, "-m", "replaykit.cli", *args], capture_output=True, text=True
            )
        )
        if proc.returncode != 0:
            error = (proc.stderr.strip().splitlines() or ["(no error output)"])[-1]
            raise SystemExit(f"Error: replaykit {' '.join(args)} exited {proc.returncode}: {error}")
        runs.append(took)
    return Sample(statistics.median(s.wall for s in runs), statistics.median(s.cpu for s in runs))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,10000")
    args = parser.parse_args()
    from replaykit.episodes.run import measure
    from replaykit.testing import small_config

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "source").mkdir()
        config = small_config(Path(tmp) / "source")
        run = measure(config).run
        source = Store(config.store_path)
        episodes = [source.get_episode(c) for c in run["cassettes"]]

        blobs: dict[str, bytes] = {}
        docs = [canonical_json(encode_episode(e, blobs)) for e in episodes]
        meta_inline = sum(len(canonical_json(e.meta)) for e in episodes) / len(episodes)
        meta_refs = sum(len(canonical_json(encode_episode(e, {})["meta"])) for e in episodes) / len(episodes)
        print("(e) store bytes per episode (quickstart panel)")
        print(
            f"    document: {sum(map(len, docs)) / len(docs):7.0f} B; meta inline (format 1) would add {meta_inline:6.0f} B, "
            f"as references (format 2) it takes {meta_refs:5.0f} B (+ shared blobs stored once)"
        )

        print(load_line())
        print("(d) listing commands (fresh CLI process each; CPU time, wall in brackets)")
        baseline: dict[str, Sample] = {}
        for size in [int(s) for s in args.sizes.split(",")]:
            store_dir = Path(tmp) / f"store-{size}"
            store = Store(store_dir)
            store.put_tree(run["harness_sha"], source.get_tree(run["harness_sha"]))
            fill(store, episodes, size)
            store.put_run(run)
            store.driver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # SQLite: the WAL into index.db
            size_bytes = sum(p.stat().st_size for p in store_dir.glob("index.db*"))
            store.close()
            last = Store(store_dir).list_cassettes(limit=None)[-1]["id"]
            times = {
                "cassettes ls": cli("cassettes", "ls", "--store", str(store_dir)),
                "runs": cli("runs", "--store", str(store_dir)),
                "cassettes show": cli("cassettes", "show", last, "--store", str(store_dir)),
            }
            baseline = baseline or times
            line = "  ".join(
                f"{k} {v.cpu:5.2f} s ({v.wall:4.2f}) {v.cpu / baseline[k].cpu:4.2f}x"
                for k, v in times.items()
            )
            ok = all(v.cpu < 1 and v.cpu / baseline[k].cpu <= 1.5 for k, v in times.items())
            print(
                f"    {size:>6} episodes ({size_bytes / size:7.0f} B/episode on disk): {line}  "
                f"[each < 1 s CPU and <= 1.5x the first size: {verdict(ok)}]"
            )


if __name__ == "__main__":
    main()
