"""Benchmark: what verifying on read costs during offline replay.

Records the quickstart panel (8 tasks x 2 seeds, reference model, local environment)
into a temporary store, then replays the run offline with the normal store (every
blob hashed against its address, every cassette row and run entry checked against
its events) and with a store whose checks are switched off, alternating, in the same
process. Prints both CPU times and the median of the paired CPU ratios (target:
verification <= 10% of replay), and the load average it saw.
Usage: python benchmarks/verify_on_read.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from replaykit.cassette.codec import decode_episode
from replaykit.cassette.events import Episode
from replaykit.cassette.store import Store
from replaykit.episodes.replay import replay_run
from replaykit.episodes.run import measure
from replaykit.testing import small_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import interleaved, load_line, median_cpu, ratio, verdict


class UncheckedStore(Store):
    """The same store with verification switched off (the baseline; never use it for real)."""

    def get_blob(self, digest: str) -> bytes:
        rows = self.driver.select("blobs", ["data"], {"hash": digest}, limit=1)
        return bytes(rows[0]["data"])

    def get_episode(self, cassette_id: str) -> Episode:
        return decode_episode(self.get_json(self.cassette_row(cassette_id)["doc"]), self.get_blob)

    def check_run(self, run: dict[str, Any]) -> None:
        return None


def replayed(store: Store, run_id: str) -> None:
    report = replay_run(store, run_id)
    assert report["identical"], report["divergence"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = small_config(Path(tmp), **{"env.timeout_sec": 31})
        run = measure(config).run.to_json()
        run_id = run["run_id"]
        replayed(Store(config.store_path, readonly=True), run_id)  # warm both (imports, trees)
        replayed(UncheckedStore(config.store_path, readonly=True), run_id)
        samples = interleaved(
            {
                "with": lambda: replayed(Store(config.store_path, readonly=True), run_id),
                "without": lambda: replayed(UncheckedStore(config.store_path, readonly=True), run_id),
            },
            args.repeats,
        )
        cost = ratio(samples["with"], samples["without"]) - 1
        calls = sum(e["llm_calls"] for e in run["episodes"])
        print(load_line())
        print(f"replay of {len(run['episodes'])} episodes ({calls} LLM calls), median of {args.repeats}:")
        print(f"  without verification {median_cpu(samples['without']) * 1000:8.1f} ms CPU")
        print(f"  with verification    {median_cpu(samples['with']) * 1000:8.1f} ms CPU")
        print(
            f"verification costs {cost:+.1%} of offline replay time (CPU, paired rounds; target <= 10%: {verdict(cost <= 0.10)})"
        )


if __name__ == "__main__":
    main()
