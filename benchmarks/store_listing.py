"""Benchmark: listing commands and store size as the store grows.

(d) ``replaykit cassettes ls``, ``runs`` and ``cassettes show`` (the real CLI, a
fresh process each, so Python start-up is included; CPU time of the child process beside
its wall time, the median of ``--repeats`` rounds run round-robin) on stores of 100 and
100,000 episodes, and a *floor* beside them, measured in the same rounds: a minimal typer +
rich command with no replaykit printing a one-row table (typer 0.29 converts its option
through pydantic), what a small CLI built the usual way costs. Verdicts are CPU ratios of
the same rounds, never an absolute budget (issue 39 item 9; the load moves those): each
command within 1x the floor and within 1.5x its cost on the smallest store (independent of
the store's size). ``benchmarks/cli_start.py`` holds the start-up goals against ``import typer``.
(e) Stored bytes per episode, with each episode's ``meta`` (pins, versions, task,
environment) deduplicated, and what it would be with ``meta`` inline in every
document (cassette format 1).

The stores are filled with copies of a recorded quickstart panel under new keys
(different seeds), in one transaction per thousand episodes.

Usage: python benchmarks/store_listing.py [--sizes 100,100000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

from replaykit.cassette.codec import encode_episode
from replaykit.cassette.events import Episode
from replaykit.cassette.store import Store
from replaykit.core.determinism import canonical_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import load_line, median_cpu, median_wall, processes_interleaved, ratio, verdict


def fill(store: Store, episodes: list[Episode], total: int) -> None:
    """``total`` copies of ``episodes`` under new keys (seed 1000 + i: every seed distinct, the
    worst case for the viewer's seed facet), one transaction per thousand."""
    for start in range(0, total, 1000):
        with store.write_lock():
            for i in range(start, min(total, start + 1000)):
                source = episodes[i % len(episodes)]
                key = dataclasses.replace(source.key, seed=1000 + i)
                store.put_episode(Episode(key, source.events, dict(source.meta, seed=key.seed)))


#: what any typer + rich command costs before its own work: the floor a listing stands on
FLOOR = (
    "import typer, rich.console, rich.table\n"
    "app = typer.Typer()\n"
    "@app.command()\n"
    "def ls(limit: int = 1) -> None:\n"
    "    t = rich.table.Table(); t.add_column('id'); t.add_row('x'); rich.console.Console().print(t)\n"
    "app(['--limit', '2'], standalone_mode=False)\n"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,100000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from replaykit.episodes.run import measure
    from replaykit.testing import small_config

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "source").mkdir()
        config = small_config(Path(tmp) / "source")
        run = measure(config).run
        source = Store(config.store_path)
        episodes = [source.get_episode(c) for c in run.cassettes]

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
        print("(d) listing commands (fresh CLI process each; CPU time, wall in brackets; round-robin)")
        sizes = [int(s) for s in args.sizes.split(",")]
        commands: dict[str, list[str]] = {}
        cases: dict[str, list[str]] = {"floor": [sys.executable, "-c", FLOOR]}
        for size in sizes:
            store_dir = Path(tmp) / f"store-{size}"
            store = Store(store_dir)
            store.put_tree(run.harness_sha, source.get_tree(run.harness_sha))
            with store.write_lock():  # the run's own cassettes: `runs` checks its entries against them
                for episode in episodes:
                    store.put_episode(episode)
            fill(store, episodes, max(0, size - len(episodes)))
            store.put_run(run)
            last = store.cassette_summaries(1)[-1]["id"]
            store.driver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # SQLite: the WAL into index.db
            store.close()
            commands = {
                "cassettes ls": ["cassettes", "ls", "--store", str(store_dir)],
                "runs": ["runs", "--store", str(store_dir)],
                "cassettes show": ["cassettes", "show", last, "--store", str(store_dir)],
            }
            for name, argv in commands.items():
                cases[f"{name}@{size}"] = [sys.executable, "-m", "replaykit.cli", *argv]
        samples = processes_interleaved(cases, args.repeats)
        floor = samples["floor"]
        print(
            f"    floor (python + typer + its pydantic adapter + a rich table, no replaykit): "
            f"{median_cpu(floor):5.3f} s ({median_wall(floor):4.2f})"
        )
        for name in commands:
            for size in sizes:
                got = samples[f"{name}@{size}"]
                grows, over = ratio(got, samples[f"{name}@{sizes[0]}"]), ratio(got, floor)
                ok = over <= 1.0 and grows <= 1.5
                print(
                    f"    {name:<15} {size:>7} episodes: {median_cpu(got):5.3f} s ({median_wall(got):4.2f})  "
                    f"{grows:4.2f}x the {sizes[0]}-episode store's, {over:4.2f}x the floor  "
                    f"[<= 1x the floor and <= 1.5x the first size: {verdict(ok)}]"
                )


if __name__ == "__main__":
    main()
