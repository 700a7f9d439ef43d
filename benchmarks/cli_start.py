"""Benchmark: CLI start-up as a CPU ratio against ``python -c "import typer"`` (issue 39 item 6).

Every case is a fresh process (the interpreter's start-up included), measured round-robin in
the same run with the baseline, so each ratio holds whatever else the machine runs: the median
of the per-round ratios of CPU time (user + system). Goals: ``replaykit --help`` within 1.5x
the baseline; ``cassettes ls`` and ``runs`` on a store of ``--size`` episodes (100,000 by
default) within 2x. The children run with bytecode caching on (``PYTHONDONTWRITEBYTECODE``
dropped) after one warm-up each, as an installed replaykit runs: compiling replaykit's
sources on every start would be measured otherwise.

The store holds copies of a recorded quickstart run under new keys (``store_listing.fill``),
its run document, and the run's harness tree.

Usage: python benchmarks/cli_start.py [--size 100000] [--repeats 9] [--keep DIR]

``--keep DIR`` builds the store in ``DIR/store-SIZE`` once and reuses it on later runs (building
100,000 episodes takes minutes); without it the store lives in a temporary folder.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from replaykit.cassette.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import load_line, median_cpu, processes_interleaved, ratio, verdict
from store_listing import fill

BASELINE = "import typer"
#: case -> (argv after ``python``, the ratio it must stay within)
GOALS = {"replaykit --help": 1.5, "cassettes ls": 2.0, "runs": 2.0}


def make_store(root: Path, size: int) -> Path:
    """A store of ``size`` episodes (and its run) from one recorded small run."""
    from replaykit.episodes.run import measure
    from replaykit.testing import small_config

    (root / "source").mkdir()
    config = small_config(root / "source")
    run = measure(config).run
    source = Store(config.store_path)
    episodes = [source.get_episode(c) for c in run.cassettes]
    path = root / f"store-{size}"
    store = Store(path)
    store.put_tree(run.harness_sha, source.get_tree(run.harness_sha))
    with store.write_lock():
        for episode in episodes:
            store.put_episode(episode)
    fill(store, episodes, max(0, size - len(episodes)))
    store.put_run(run)
    store.driver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # SQLite: the WAL into index.db
    store.close()
    return path


def kept_store(keep: Path, size: int) -> Path:
    """The store of ``size`` episodes under ``keep``, built there on first use (a store whose
    build did not finish is built again: ``done`` is written last)."""
    root = keep / f"build-{size}"
    if not (root / "done").exists():
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        make_store(root, size)
        (root / "done").write_text("")
    return root / f"store-{size}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000, help="episodes in the listings' store")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--keep", type=Path, help="build the store here once and reuse it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = str(kept_store(args.keep, args.size) if args.keep else make_store(Path(tmp), args.size))
        cli = [sys.executable, "-m", "replaykit.cli"]
        cases = {
            BASELINE: [sys.executable, "-c", BASELINE],
            "replaykit --help": [*cli, "--help"],
            "cassettes ls": [*cli, "cassettes", "ls", "--store", store],
            "runs": [*cli, "runs", "--store", store],
        }
        samples = processes_interleaved(cases, args.repeats)
        print(load_line())
        base = samples[BASELINE]
        print(f"CLI start-up, fresh processes, {args.repeats} rounds; store of {args.size} episodes")
        print(f"    {'python -c ' + repr(BASELINE):<28} {median_cpu(base):6.3f} s CPU  (the baseline)")
        for name, goal in GOALS.items():
            got = samples[name]
            times = ratio(got, base)
            print(
                f"    {name:<28} {median_cpu(got):6.3f} s CPU  {times:4.2f}x the baseline"
                f"  [<= {goal}x: {verdict(times <= goal)}]"
            )


if __name__ == "__main__":
    main()
