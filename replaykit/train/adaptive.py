"""Adaptive seeds: ``panel.seeds: {adaptive: {min: 2, max: 8}}`` (issue 37 item 5).

Seeds are drawn in order, ``start``, ``start+1``, … (``start`` defaults to 0). Every run of a
training measures each task on the first ``min`` (``PanelConfig.seed_list``); an epoch's
verdict then measures more seeds of the deciding panel, baseline and candidate alike, only
where the decision is open, in rounds:

- over every paired instance measured so far, ``b`` were solved by the baseline alone and ``c``
  by the candidate alone (an infrastructure failure solves nothing);
- the decision is **settled** (*futile*) when the one-sided exact McNemar p of ``(b, c)`` would
  stay above ``alpha`` even if every seed the open tasks could still take were solved by the
  candidate alone: more seeds could not change it (a baseline-only solve only raises p);
- a task is **open** while the decision is not settled, it is *discordant* (one of its seeds
  was solved by one side and not the other) and it has fewer than ``max`` seeds: a round
  measures its next seed on both sides. A concordant task stops at ``min``.

The rounds never stop because the test *looks* significant: stopping at the first look below
``alpha`` is optional stopping, which accepts a change that does nothing more often than
``alpha``. So the decision is the one the discordant tasks would give at ``max`` seeds each
(a futile stop changes none); only the concordant tasks' seeds and the futile rounds are saved.

``alpha`` is the epoch's ``paired_test`` level (its share of ``train.error_budget`` when set),
else 0.05. Everything is decided from the grades, so a replay (record mode none) takes the
same rounds from the same cassettes. The verdict judges the two extended runs (stored as
runs, named by the epoch's deciding panel and by the verdict); the epoch records the stopping
points (``adaptive``: the seeds each task was measured on, and why the rounds stopped), which
``replaykit replay TRAINING`` compares and ``audit VERDICT`` shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from replaykit.cassette.backend import DocumentStore, RunStore
from replaykit.cassette.keys import CassetteKey
from replaykit.core.errors import ReplaykitError
from replaykit.core.run_doc import EpisodeSummary, RunDoc
from replaykit.core.training_doc import AdaptiveRecord
from replaykit.episodes.config import AdaptiveRange, RunConfig
from replaykit.episodes.config_paths import task_folders
from replaykit.episodes.panel_keys import template_keys
from replaykit.episodes.run_document import run_document
from replaykit.train.paired_test import PairedTest
from replaykit.train.significance import ALPHA, mcnemar_exact
from replaykit.train.verdicts import Criterion

#: ``(sha, task ids, seed, baseline sha) -> the run of those tasks at that seed`` (measured or replayed)
MeasureSeed = Callable[[str, list[str], int, str | None], RunDoc]


class Unrecorded(Exception):
    """A round's episodes the store does not hold (an offline walk cannot take that round)."""

    def __init__(self, keys: list[CassetteKey]) -> None:
        super().__init__(f"{len(keys)} episode(s) never recorded")
        self.keys = keys


def level(criterion: Criterion) -> float:
    """The alpha the rounds stop at: a ``paired_test``'s level, else 0.05."""
    return criterion.spends if isinstance(criterion, PairedTest) else ALPHA


def _solved(e: EpisodeSummary) -> bool:
    return bool(e.passed) and not e.infra_failure


def _pairs(baseline: RunDoc, candidate: RunDoc) -> dict[str, list[tuple[bool, bool]]]:
    """Task → (baseline solved, candidate solved) of each seed both runs measured."""
    b = {e.unit: e for e in baseline.episodes}
    out: dict[str, list[tuple[bool, bool]]] = {}
    for e in candidate.episodes:
        other = b.get(e.unit)
        if other is not None:
            out.setdefault(e.task_id, []).append((_solved(other), _solved(e)))
    return dict(sorted(out.items()))


def open_tasks(
    baseline: RunDoc, candidate: RunDoc, rng: AdaptiveRange, alpha: float
) -> tuple[list[str], str]:
    """The tasks the next round measures, and (when none) why the rounds stop: ``futile``,
    ``concordant`` (no task is discordant) or ``max``."""
    pairs = _pairs(baseline, candidate)
    b = sum(1 for ps in pairs.values() for x, y in ps if x and not y)
    c = sum(1 for ps in pairs.values() for x, y in ps if y and not x)
    discordant = [t for t, ps in pairs.items() if any(x != y for x, y in ps)]
    room = {t: rng.max - len(pairs[t]) for t in discordant if len(pairs[t]) < rng.max}
    if not discordant:
        return [], "concordant"
    if not room:
        return [], "max"
    if mcnemar_exact(b, c + sum(room.values()))[1] > alpha:
        return [], "futile"
    return sorted(room), ""


def merged(store: RunStore, config: RunConfig, run: RunDoc, extra: list[RunDoc]) -> RunDoc:
    """``run`` with the episodes of ``extra`` after its own: the run an adaptive verdict judges."""
    keys: list[CassetteKey] = template_keys(store, [c for r in (run, *extra) for c in r.cassettes])
    seeds = sorted({k.seed for k in keys})
    panel = config.panel.model_copy(update={"seeds": seeds})
    cfg = config.model_copy(update={"panel": panel})
    return run_document(
        cfg, store, run.harness_sha, config.model, [(k, None) for k in keys], run.harness_repo
    )


def extend(
    store: RunStore,
    config: RunConfig,
    baseline: RunDoc,
    candidate: RunDoc,
    alpha: float,
    measure_seed: MeasureSeed,
) -> tuple[RunDoc, RunDoc, AdaptiveRecord]:
    """The rounds of one epoch (see the module doc): both runs extended, and the stopping points."""
    rng = config.panel.adaptive
    assert rng is not None, "extend() is for an adaptive panel"
    extra_b: list[RunDoc] = []
    extra_c: list[RunDoc] = []
    base, cand = baseline, candidate
    rounds = 0
    while True:
        tasks, why = open_tasks(base, cand, rng, alpha)
        if not tasks:
            break
        seed = rng.start + rng.min + rounds
        extra_b.append(measure_seed(baseline.harness_sha, tasks, seed, None))
        extra_c.append(measure_seed(candidate.harness_sha, tasks, seed, baseline.harness_sha))
        base, cand = merged(store, config, baseline, extra_b), merged(store, config, candidate, extra_c)
        rounds += 1
    seeds = {t: len(ps) for t, ps in _pairs(base, cand).items()}
    record: AdaptiveRecord = {
        "min": rng.min,
        "max": rng.max,
        "start": rng.start,
        "alpha": alpha,
        "rounds": rounds,
        "stopped": why,
        "seeds": seeds,
        "episodes": len(base.episodes) + len(cand.episodes),
    }
    return base, cand, record


def seed_keys(template: list[CassetteKey], tasks: list[str], seed: int) -> list[CassetteKey]:
    """A replay's keys of ``tasks`` at ``seed``: each task's first recorded key at that seed."""
    first: dict[str, CassetteKey] = {}
    for k in template:
        first.setdefault(k.task_id, k)
    return [dataclasses.replace(first[t], seed=seed) for t in tasks if t in first]


def stored_round(store: RunStore, config: RunConfig, template: list[CassetteKey], repo: str) -> MeasureSeed:
    """A round read from the store alone (``Unrecorded`` when it lacks any of its episodes)."""

    def seed_run(sha: str, tasks: list[str], seed: int, _base: str | None) -> RunDoc:
        keys = [dataclasses.replace(k, harness_sha=sha) for k in seed_keys(template, tasks, seed)]
        missing = [k for k in keys if not store.has(k.id)]
        if missing:
            raise Unrecorded(missing)
        return run_document(config, store, sha, config.model, [(k, None) for k in keys], repo)

    return seed_run


def base_template(template: list[CassetteKey], config: RunConfig) -> list[CassetteKey]:
    """A recorded run's keys on the seeds every run measures (an adaptive verdict's runs hold more)."""
    seeds = set(config.panel.seed_list)
    return [k for k in template if k.seed in seeds]


def stopping_points(store: DocumentStore, verdict_id: str, training_id: str | None) -> AdaptiveRecord | None:
    """The stopping points its training recorded for the epoch that made ``verdict_id``, if adaptive."""
    if not training_id:
        return None
    try:
        doc = store.get_training(training_id)
    except ReplaykitError:  # a verdict without its training (a store holding only part of one)
        return None
    rec = next((e for e in doc.epochs if e.verdict_id == verdict_id), None)
    return rec.adaptive if rec else None


def summary(record: AdaptiveRecord) -> str:
    """One line: how many seeds each task took, and why the rounds stopped."""
    counts: dict[int, int] = {}
    for n in record["seeds"].values():
        counts[n] = counts.get(n, 0) + 1
    spread = ", ".join(f"{k} task(s) x {n} seed(s)" for n, k in sorted(counts.items()))
    why = {
        "futile": "no more seeds could make it significant",
        "concordant": "no task was discordant",
        "max": "the open tasks reached max",
    }.get(record["stopped"], record["stopped"])
    return (
        f"adaptive seeds (min {record['min']}, max {record['max']}): {spread}, {record['rounds']} round(s), "
        f"{record['episodes']} episode(s); stopped: {why}"
    )


def seed_config(config: RunConfig, tasks: list[str], seed: int) -> RunConfig:
    """``config`` measuring only ``tasks`` (ids of its panel) at ``seed``: a round, measured live."""
    found = task_folders(config.panel.tasks, config.base_dir)
    folders = [str(f) for f in found if f.name in tasks]  # a task's id is its folder's name
    out = config.model_copy(
        update={"panel": config.panel.model_copy(update={"tasks": folders, "seeds": [seed]})}
    )
    out.base_dir = config.base_dir
    return out
