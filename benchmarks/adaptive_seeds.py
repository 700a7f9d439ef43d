"""Benchmark: what adaptive seeds save, and whether they decide as a fixed panel does (issue 37
item 5).

The trainings of ``null_trainings.py`` (its world: ``null_world.py``, the ``reference-noisy`` task
model): N null trainings (proposals that change nothing) and M with one real improvement, each
run twice under ``paired_test`` at ``--alpha``: on a fixed panel of ``--max`` seeds per task,
and with ``panel.seeds: {adaptive: {min: --min, max: --max}}`` on the same seeds (training ``i``
takes seeds ``max*i ..``, so trainings are independent samples and the adaptive training's
episodes are the fixed one's: it replays them from the store). Printed: the episodes each spent
on its verdicts (both runs of the deciding panel, summed over the judged epochs), how often the
two decided an epoch alike, and each one's false accepts (null) and power (real), with exact
95% intervals. Figures only; ``docs/training.md`` keeps the ones measured for the docs.

Usage: python benchmarks/adaptive_seeds.py [--trainings 40] [--real 20] [--epochs 2]
       [--min 2] [--max 8] [--alpha 0.05] [--cache DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import null_world as world
from null_trainings import bad, cell, prepare, rate

MAX_SEEDS = 64  # as panel.seeds.adaptive.max allows


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainings", type=int, default=40, help="null trainings (N)")
    parser.add_argument("--real", type=int, default=20, help="trainings with one real improvement (M)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs per training")
    parser.add_argument("--min", type=int, default=2, help="adaptive: seeds every task is measured on")
    parser.add_argument("--max", type=int, default=8, help="adaptive: most seeds; the fixed panel's seeds")
    parser.add_argument("--alpha", type=float, default=0.05, help="paired_test's alpha")
    parser.add_argument("--cache", type=Path, default=None, help="where the store and repos are kept")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    args = parser.parse_args(argv)
    if not 0 < args.alpha < 1:
        bad(f"--alpha {args.alpha}: give a level strictly between 0 and 1, e.g. 0.05")
    for flag, value, low, high in (
        ("--trainings", args.trainings, 0, 100_000),
        ("--real", args.real, 0, 100_000),
        ("--epochs", args.epochs, 1, 16),
        ("--min", args.min, 1, MAX_SEEDS),
        ("--max", args.max, 1, MAX_SEEDS),
    ):
        if not low <= value <= high:
            bad(f"{flag} {value}: give a whole number from {low} to {high}")
    if args.min > args.max:
        bad(f"--min {args.min} is above --max {args.max}; give min <= max, e.g. --min 2 --max 8")
    if args.trainings + args.real == 0:
        bad("--trainings 0 --real 0: nothing to measure")
    return args


def train(
    args: argparse.Namespace, cache: Path, tasks: list[Path], template: Path, kind: str, i: int, mode: str
) -> list[dict[str, Any]]:
    """One training (``mode``: fixed or adaptive); each epoch's decision and verdict episodes."""
    from replaykit.train.trainer import Trainer

    name = f"{kind}-{i:05d}-{mode}"
    repo = cache / "repos" / name
    if not (repo / ".git").exists():
        world.fresh_repo(template, repo)
    diffs = [world.null_diff(e) for e in range(args.epochs)]
    if kind == "real":
        diffs[0] = world.real_diff()
    first = args.max * i
    seeds: Any = (
        list(range(first, first + args.max))
        if mode == "fixed"
        else {"adaptive": {"min": args.min, "max": args.max, "start": first}}
    )
    criterion = {"name": "paired_test", "alpha": args.alpha}
    data = world.config(cache, cache / "store", repo, tasks, seeds, args.epochs, diffs, criterion, None)
    path = cache / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    trainer = Trainer(config_path=path)
    out = []
    for loss in trainer.epochs(args.epochs):
        loss.backward()
        trainer.optimizer.step()
        base, cand = loss.runs()
        spent = len(base.episodes) + len(cand.episodes) if base and cand and loss.verdict else 0
        out.append(
            {
                "decision": "skipped" if loss.skipped else ("accepted" if loss.accept else "rejected"),
                "episodes": spent,
            }
        )
    return out


def summarise(args: argparse.Namespace, results: list[dict[str, Any]]) -> dict[str, Any]:
    modes: dict[str, Any] = {}
    for mode in ("fixed", "adaptive"):
        mine = [r for r in results if r["mode"] == mode]
        null = [r for r in mine if r["kind"] == "null"]
        real = [r for r in mine if r["kind"] == "real"]
        modes[mode] = {
            "episodes": sum(e["episodes"] for r in mine for e in r["epochs"]),
            "false_accept": rate(
                sum(any(e["decision"] == "accepted" for e in r["epochs"]) for r in null), len(null)
            ),
            "power": rate(sum(r["epochs"][0]["decision"] == "accepted" for r in real), len(real)),
        }
    pairs = [
        (f["epochs"][0]["decision"], a["epochs"][0]["decision"])  # the first epoch: the same baseline
        for f in results
        for a in results
        if f["mode"] == "fixed"
        and a["mode"] == "adaptive"
        and (f["kind"], f["index"]) == (a["kind"], a["index"])
    ]
    fixed, adaptive = modes["fixed"]["episodes"], modes["adaptive"]["episodes"]
    return {
        "kind": "adaptive_seeds",
        "trainings": args.trainings,
        "real": args.real,
        "epochs": args.epochs,
        "panel": {"tasks": len(world.WORDS), "min": args.min, "max": args.max, "model": "reference-noisy"},
        "alpha": args.alpha,
        "modes": modes,
        "episodes_saved": 1 - adaptive / fixed if fixed else None,
        "first_epoch_agreement": rate(sum(f == a for f, a in pairs), len(pairs)),
    }


def show(report: dict[str, Any]) -> None:
    p = report["panel"]
    print(
        f"{report['trainings']} null and {report['real']} real training(s) of {report['epochs']} epoch(s), "
        f"{p['tasks']} tasks, paired_test alpha {report['alpha']}, {p['model']}"
    )
    for mode, m in report["modes"].items():
        label = f"fixed {p['max']} seeds" if mode == "fixed" else f"adaptive {p['min']}..{p['max']}"
        print(f"{label}: {m['episodes']} verdict episode(s)")
        print(f"  false accepts, per training: {cell(m['false_accept'])}")
        print(f"  power on the real change:    {cell(m['power'])}")
    saved = report["episodes_saved"]
    print(f"adaptive spent {'-' if saved is None else f'{saved:.0%}'} fewer episodes on its verdicts")
    print(f"first epochs decided alike: {cell(report['first_epoch_agreement'])}")
    print(f"cost: {report['cost']['wall_s']:.0f} s wall; rates: 95% exact intervals")


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    cache = args.cache or Path(tempfile.gettempdir()) / f"replaykit-bench-adaptive-{args.epochs}x{args.max}"
    start = time.monotonic()
    tasks, template = prepare(cache)
    results = []
    for kind, count in (("null", args.trainings), ("real", args.real)):
        for i in range(count):
            for mode in ("fixed", "adaptive"):  # fixed first: the adaptive one replays its episodes
                epochs = train(args, cache, tasks, template, kind, i, mode)
                results.append({"kind": kind, "index": i, "mode": mode, "epochs": epochs})
    report = summarise(args, results)
    report["cost"] = {"wall_s": time.monotonic() - start, "cache": str(cache)}
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        show(report)


if __name__ == "__main__":
    main()
