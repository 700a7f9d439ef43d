"""Benchmark: offline audits of a recorded training (counterfactual walk, sweep, seed-robustness).

Uses the worst-case patch-queue training of ``training_replay.py`` (E epochs × T tasks,
every epoch a real candidate; recorded once into a cache folder), then times, in the
same process:

- ``counterfactual`` with the recorded criterion and optimizer (rebuilds every recorded
  candidate commit from the stored trees in a scratch clone, looks every measurement up
  by key, recomputes every verdict);
- the same with a counterfactual criterion that accepts every candidate (so the
  baseline moves at epoch 0 and the next proposal is re-applied elsewhere);
- a 2 × 3 sweep (criteria × optimizers) sharing one scratch clone;
- ``replay_training`` of the same training (re-runs every episode offline), as the
  baseline the audit figures are compared with.

The four are measured round-robin over ``--repeats`` rounds (``measure.interleaved``), so
each audit's CPU ratio to the replay pairs runs taken under the same load; medians are
printed (CPU time of the process tree, wall beside it). Figures only: no target.

Usage: python benchmarks/audit.py [--epochs 30] [--tasks 20] [--repeats 3] [--cache DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import interleaved, load_line, median_cpu, median_wall, ratio


class AcceptAll:
    """A criterion that accepts every measured candidate (forces an early divergence)."""

    name = "accept_all"

    def params(self) -> dict[str, Any]:
        return {}

    def __call__(
        self, candidate: dict[str, Any], baseline: dict[str, Any], exclude: dict[str, str] | None = None
    ) -> Any:
        from replaykit.train.verdicts import Verdict

        return Verdict(self.name, {}, True, 0.0, "accepts everything (benchmark)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=3, help="rounds; medians are printed")
    args = parser.parse_args()
    cache = args.cache or Path(tempfile.gettempdir()) / f"replaykit-bench-training-{args.epochs}x{args.tasks}"

    from training_replay import prepare  # the same recorded training as the replay benchmark

    from replaykit.cassette.store import Store
    from replaykit.train.audit import replay_training
    from replaykit.train.counterfactual import counterfactual
    from replaykit.train.criteria import register_criterion
    from replaykit.train.sweep import sweep

    register_criterion(AcceptAll.name, AcceptAll)
    store_path, training_id = prepare(cache, args.epochs, args.tasks)
    store = Store(store_path)
    replay_training(store, training_id)  # warm: imports, trees, the scratch clone's objects
    print(load_line())
    print(f"training {training_id}: {args.epochs} epochs x {args.tasks} tasks")
    out: dict[str, Any] = {}

    def keep(name: str, fn: Any) -> Any:
        return lambda: out.__setitem__(name, fn())

    cells = (["strict_pareto", "mean_reward"], ["greedy_monotonic", "margin_greedy", "pareto_frontier"])
    cases = {
        "replay_training (every episode re-run)": keep("replay", lambda: replay_training(store, training_id)),
        "audit, recorded criterion and optimizer": keep("same", lambda: counterfactual(store, training_id)),
        "audit --criterion accept_all": keep(
            "flip", lambda: counterfactual(store, training_id, "accept_all")
        ),
        "sweep 2 criteria x 3 optimizers": keep("sweep", lambda: sweep(store, training_id, *cells)),
    }
    samples = interleaved(cases, args.repeats)
    baseline = samples["replay_training (every episode re-run)"]
    for label, got in samples.items():
        versus = "" if got is baseline else f"  ({ratio(got, baseline):.2f}x the training replay's CPU)"
        print(f"{label:<48} {median_cpu(got):7.2f} s CPU ({median_wall(got):6.2f} s wall){versus}")
    rep, same, flip, sw = out["replay"], out["same"], out["flip"], out["sweep"]
    same_cpu = median_cpu(samples["audit, recorded criterion and optimizer"])
    sweep_cpu = median_cpu(samples["sweep 2 criteria x 3 optimizers"])
    print(
        f"replay identical={rep['identical']} · recorded audit reproduces={same['reproduces_recorded']} · "
        f"accept_all flips {len(flip['flipped'])} epoch(s), needs {len(flip['needs_recording'])} episode(s) · "
        f"sweep cells {len(sw['cells'])}"
    )
    print(
        f"per epoch (CPU): recorded audit {1000 * same_cpu / args.epochs:.1f} ms, sweep cell {1000 * sweep_cpu / len(sw['cells']) / args.epochs:.1f} ms"
    )


if __name__ == "__main__":
    main()
