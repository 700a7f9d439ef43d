"""Benchmark: what verifying on read costs during offline replay.

Records the quickstart panel (8 tasks x 2 seeds, reference model, local environment)
into a temporary store, then replays the run offline with the normal store (every
blob hashed against its address, every cassette row and run entry checked against
its events) and with a store whose checks are switched off, alternating, in the same
process. Prints both times and the ratio (target: verification <= 10% of replay).
Usage: python benchmarks/verify_on_read.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from replaykit.cassette.codec import decode_episode
from replaykit.cassette.events import Episode
from replaykit.cassette.store import Store
from replaykit.episodes.run import measure, replay_run
from replaykit.testing import small_config


class UncheckedStore(Store):
    """The same store with verification switched off (the baseline; never use it for real)."""

    def get_blob(self, digest: str) -> bytes:
        row = self.db.conn.execute("SELECT data FROM blobs WHERE hash = ?", (digest,)).fetchone()
        return bytes(row[0])

    def get_episode(self, cassette_id: str) -> Episode:
        return decode_episode(self.get_json(self.cassette_row(cassette_id)["doc"]), self.get_blob)

    def check_run(self, run: dict[str, Any]) -> None:
        return None


def timed(store: Store, run_id: str) -> float:
    t0 = time.perf_counter()
    report = replay_run(store, run_id)
    elapsed = time.perf_counter() - t0
    assert report["identical"], report["divergence"]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = small_config(Path(tmp), **{"env.timeout_sec": 31})
        run = measure(config).run
        checked, unchecked = (
            Store(config.store_path, readonly=True),
            UncheckedStore(config.store_path, readonly=True),
        )
        timed(checked, run["run_id"]), timed(unchecked, run["run_id"])  # warm both (imports, trees)
        with_checks, without = [], []
        for _ in range(args.repeats):
            with_checks.append(timed(Store(config.store_path, readonly=True), run["run_id"]))
            without.append(timed(UncheckedStore(config.store_path, readonly=True), run["run_id"]))
        best_with, best_without = statistics.median(with_checks), statistics.median(without)
        calls = sum(e["llm_calls"] for e in run["episodes"])
        print(f"replay of {len(run['episodes'])} episodes ({calls} LLM calls), median of {args.repeats}:")
        print(f"  without verification {best_without * 1000:8.1f} ms")
        print(f"  with verification    {best_with * 1000:8.1f} ms")
        print(
            f"verification costs {(best_with - best_without) / best_without:+.1%} of offline replay time (target <= 10%)"
        )


if __name__ == "__main__":
    main()
