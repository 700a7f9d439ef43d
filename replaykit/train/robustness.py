"""Seed-robustness of a verdict: does the decision hold on subsets of the recorded seeds?

``replaykit audit VERDICT_ID --resample-seeds K`` recomputes the verdict (its own
criterion, or ``--criterion``) on every K-subset of the recorded seeds — or, with
``--bootstrap N``, on N samples of K seeds drawn with replacement (a fixed RNG
seed, so the report is reproducible) — from the two stored runs only, and says how
often the recorded decision holds: "this acceptance survives 9 of 10 seed subsets".
"""

from __future__ import annotations

import random
from itertools import combinations
from math import comb

from replaykit.cassette.backend import RunStore
from replaykit.core.errors import ConfigError
from replaykit.core.run_doc import EpisodeSummary, RunDoc
from replaykit.core.verdict_doc import VerdictDoc
from replaykit.train.audit_records import SeedRobustness, SeedSample
from replaykit.train.criteria import make_criterion
from replaykit.train.derived import verified_verdict
from replaykit.train.walk import parse_spec

MAX_SUBSETS = 10_000


def _restrict(run: RunDoc, seeds: tuple[int, ...]) -> RunDoc:
    """The run's episodes on ``seeds`` (a seed drawn twice counts twice, as a distinct instance)."""
    episodes: list[EpisodeSummary] = []
    for i, seed in enumerate(seeds):
        label: int | str = seed if len(set(seeds)) == len(seeds) else f"{seed}~{i}"
        episodes.extend(e.model_copy(update={"seed": label}) for e in run.episodes if e.seed == seed)
    return run.replaced(episodes=episodes)


def resample_seeds(
    store: RunStore,
    verdict_id: str,
    k: int,
    bootstrap: int | None = None,
    criterion: str | None = None,
    rng_seed: int = 0,
) -> SeedRobustness:
    """``audit VERDICT --resample-seeds K``: the verdict, verified first (a forged one is store
    corrupt), recomputed on every subset of ``k`` seeds (or ``bootstrap`` samples)."""
    doc = verified_verdict(store, verdict_id)  # its exclusions follow from its certificates
    baseline = store.get_run(doc.baseline_run)
    candidate = store.get_run(str(doc.candidate_run))  # a verdict names its candidate run
    return resample(doc, baseline, candidate, k, bootstrap, criterion, rng_seed)


def resample(
    doc: VerdictDoc,
    baseline: RunDoc,
    candidate: RunDoc,
    k: int,
    bootstrap: int | None = None,
    criterion: str | None = None,
    rng_seed: int = 0,
) -> SeedRobustness:
    """A verified verdict over its two runs, recomputed on seed subsets."""
    recorded = doc.verdict
    seeds = sorted({int(e.seed) for e in baseline.episodes} & {int(e.seed) for e in candidate.episodes})
    if not 1 <= k <= len(seeds):
        raise ConfigError(
            f"--resample-seeds {k}: the verdict's runs have {len(seeds)} seed(s) ({', '.join(map(str, seeds))}); use 1..{len(seeds)}"
        )
    if bootstrap is not None and bootstrap < 1:
        raise ConfigError(f"--bootstrap {bootstrap}: give a number of samples ≥ 1")
    name, params = parse_spec(criterion) if criterion else (recorded["criterion"], recorded["params"])
    crit = make_criterion(name, **params)
    full = crit(candidate, baseline, recorded.get("excluded"))
    if bootstrap:
        rng = random.Random(rng_seed)
        samples = [tuple(sorted(rng.choice(seeds) for _ in range(k))) for _ in range(bootstrap)]
    else:
        if comb(len(seeds), k) > MAX_SUBSETS:
            raise ConfigError(
                f"--resample-seeds {k} of {len(seeds)} seeds makes {comb(len(seeds), k)} subsets (more than "
                f"{MAX_SUBSETS}); add --bootstrap N to draw N samples instead"
            )
        samples = list(combinations(seeds, k))
    rows: list[SeedSample] = []
    for sample in samples:
        v = crit(_restrict(candidate, sample), _restrict(baseline, sample), recorded.get("excluded"))
        rows.append(
            {
                "seeds": list(sample),
                "accept": v.accept,
                "holds": v.accept == full.accept,
                "loss": v.loss,
                "reason": v.reason,
            }
        )
    holds = sum(1 for r in rows if r["holds"])
    word = "acceptance" if full.accept else "rejection"
    method = f"bootstrap samples of {k} seed(s)" if bootstrap else f"subsets of {k} of {len(seeds)} seed(s)"
    return {
        "verdict_id": doc.verdict_id,
        "kind": "seed_robustness",
        "training_id": doc.training_id,
        "epoch": doc.epoch,
        "criterion": {"name": crit.name, "params": crit.params()},
        "recorded_accept": recorded["accept"],
        "accept": full.accept,
        "seeds": seeds,
        "k": k,
        "method": "bootstrap" if bootstrap else "subsets",
        "samples": rows,
        "holds": holds,
        "total": len(rows),
        "share": holds / max(len(rows), 1),
        "summary": f"this {word} survives {holds} of {len(rows)} {method}",
    }
