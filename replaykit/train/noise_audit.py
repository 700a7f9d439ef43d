"""``replaykit audit TRAINING --noise``: was each epoch's verdict signal or noise?

Every judged epoch gets its ``noise_floor`` and ``within_noise`` (``train/stats.py``),
computed offline from the recorded runs (forked tasks excluded, from the certificates)
and each side's replicate statistics; the report counts the accepted epochs that were
within noise, and those whose wins were all ``incidental`` (``train/attribution.py``).

``--resample-seeds N`` first measures both sides of every judged epoch on N seeds beyond
the recorded ones (live, once, in the training's harness repository, through ``measure``:
its cassettes and runs are stored); later audits find them in the store and stay offline.
The noise is then computed over the recorded and the extra seeds together.

Each judged epoch also gets its paired comparison (``stats.paired``) and ``p_value``, the exact
one-sided McNemar p that its candidate solves more; ``p_holm`` adjusts them for every judged
epoch of the training together (Holm): a training is many tests, and each accept is one more.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from replaykit.cassette.backend import EpisodeStore, RunStore, StoreBackend
from replaykit.cassette.keys import CassetteKey
from replaykit.core.errors import ConfigError, HarnessError
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress
from replaykit.core.run_doc import RunDoc
from replaykit.core.training_doc import EpochRecord, TrainingDoc
from replaykit.core.verdict_doc import VerdictDoc
from replaykit.episodes.config import RunConfig
from replaykit.episodes.run import measure
from replaykit.episodes.run_document import run_document
from replaykit.train.attribution import Flip, attribute
from replaykit.train.derived import verified_training, verified_verdict
from replaykit.train.panels import first_baseline_run, panel_config, recorded_deciding
from replaykit.train.significance import holm
from replaykit.train.stats import Interval, Paired, Score, noise, paired, stored_run_stats
from replaykit.train.walk import training_config


class SideStats(TypedDict):
    run_id: str
    solved: int
    total: int
    pass_at_k: dict[str, float]
    pass_hat_k: dict[str, float]
    seed_flip_rate: float | None
    reexec_flip_rate: float | None


class EpochAttribution(TypedDict):
    """An epoch's flips (of its verified verdict), attributed or incidental (``train/attribution.py``)."""

    attributed: int
    incidental: int
    wins: int  # new solves
    wins_incidental: int
    flips: list[Flip]
    ended_by: dict[str, int]  # flips whose failing episode ended on a call gone wrong, by facet


class EpochNoise(TypedDict):
    epoch: int
    decision: str  # accepted | rejected | skipped (as recorded)
    margin: float | None
    noise_floor: float | None
    within_noise: bool | None
    interval: Interval | None
    seed_flip_rate: float | None
    seeds: list[int]  # the seeds the noise was computed over
    excluded: dict[str, str]  # forked tasks, from the certificates
    baseline: SideStats | None
    candidate: SideStats | None
    paired: Paired | None  # the paired comparison (difference, interval, McNemar, mde)
    p_value: float | None  # exact one-sided McNemar: the candidate solves more
    p_holm: float | None  # p_value adjusted over every judged epoch (Holm)
    attribution: NotRequired[EpochAttribution]


class NoiseAudit(TypedDict):
    training_id: str
    kind: str  # noise_audit
    criterion: str
    score: str
    resampled_seeds: list[int]
    epochs: list[EpochNoise]
    accepted: list[int]
    accepted_within_noise: list[int]
    accepted_all_incidental: NotRequired[list[int]]
    accepted_significant: list[int]  # accepted epochs whose Holm-adjusted p is at most 0.05
    summary: str


def _side(store: RunStore, run: RunDoc) -> SideStats:
    stats = stored_run_stats(store, run)
    return {
        "run_id": run.run_id,
        "solved": run.solved,
        "total": run.total,
        "pass_at_k": stats["pass_at_k"],
        "pass_hat_k": stats["pass_hat_k"],
        "seed_flip_rate": stats["seed_flip_rate"],
        "reexec_flip_rate": stats["reexec_flip_rate"],
    }


def _attribution(
    store: EpisodeStore, doc: VerdictDoc, baseline: RunDoc, candidate: RunDoc
) -> EpochAttribution:
    """The epoch's flips (of its verified verdict), attributed or incidental."""
    found = attribute(store, baseline, candidate, doc.verdict)
    wins = [f for f in found["flips"] if f["movement"] == "new_solve"]
    return {
        "attributed": found["attributed"],
        "incidental": found["incidental"],
        "wins": len(wins),
        "wins_incidental": sum(1 for f in wins if f["label"] == "incidental"),
        "flips": found["flips"],
        "ended_by": _ended_by(found["flips"]),
    }


def _ended_by(flips: list[Flip]) -> dict[str, int]:
    """Flips whose failing episode ended on a call gone wrong, by its facet (cassette/facets.py)."""
    seen = [f["ended_by"] for f in flips if f.get("ended_by")]
    return {facet: seen.count(facet) for facet in sorted(set(seen))}


class ExtraSeeds:
    """Each harness SHA's episodes on the extra seeds: from the store, or measured once (live)."""

    def __init__(self, store: StoreBackend, doc: TrainingDoc, n: int, live: bool) -> None:
        self.store, self.doc, self.live = store, doc, live
        first = store.get_run(str(first_baseline_run(doc)))  # the deciding panel's (val, when given)
        recorded = sorted({int(e.seed) for e in first.episodes})
        self.seeds = [max(recorded, default=-1) + 1 + i for i in range(n)]
        config = panel_config(training_config(doc, store), recorded_deciding(doc))
        panel = config.panel.model_copy(update={"seeds": self.seeds})
        self.config: RunConfig = config.model_copy(update={"panel": panel})
        self.config.base_dir = config.base_dir
        tasks: dict[str, CassetteKey] = {}
        for cid in first.cassettes:
            key = CassetteKey.from_canonical(json.loads(store.cassette_row(cid)["key_json"]))
            tasks.setdefault(key.task_id, key)
        self.templates = list(tasks.values())
        self.repo = first.harness_repo
        self.cache: dict[str, RunDoc] = {}

    def run(self, sha: str, progress: Progress | None) -> RunDoc:
        if sha not in self.cache:
            keys = [replace(k, harness_sha=sha, seed=s) for k in self.templates for s in self.seeds]
            if any(not self.store.has(k.id) for k in keys):
                self._record(sha, progress)
            pairs: list[Any] = [(k, None) for k in keys]  # run_document reads only the keys
            run = run_document(self.config, self.store, sha, self.config.model, pairs, self.repo)
            self.store.check_run(run)
            self.cache[sha] = run
        return self.cache[sha]

    def _record(self, sha: str, progress: Progress | None) -> None:
        if not self.live:
            raise ConfigError("the extra seeds are not recorded yet; rerun with the store writable")
        repo = Path(self.doc.harness_repo)
        if not (repo / ".git").exists():
            raise HarnessError(
                f"--resample-seeds records new episodes in the training's harness repository {repo}, which is gone; "
                "restore it (or audit --noise without --resample-seeds, offline)"
            )
        harness = self.config.harness.model_copy(update={"repo": str(repo), "template": None})
        config = self.config.model_copy(update={"harness": harness})
        config.base_dir = self.config.base_dir
        measure(config, record_mode=RecordMode.ONCE, sha=sha, store=self.store, progress=progress)


def _with(run: RunDoc, extra: RunDoc | None) -> RunDoc:
    """The run's episodes and the extra seeds' together."""
    return run if extra is None else run.replaced(episodes=[*run.episodes, *extra.episodes])


def _epoch(
    store: RunStore,
    e: EpochRecord,
    score: Score,
    extra: ExtraSeeds | None,
    progress: Progress | None,
) -> EpochNoise:
    row: EpochNoise = {
        "epoch": e.epoch,
        "decision": str(e.decision),
        "margin": None,
        "noise_floor": None,
        "within_noise": None,
        "interval": None,
        "seed_flip_rate": None,
        "seeds": [],
        "excluded": {},
        "baseline": None,
        "candidate": None,
        "paired": None,
        "p_value": None,
        "p_holm": None,
    }
    if not (e.verdict and e.baseline_run and e.candidate_run):
        return row
    baseline, candidate = store.get_run(str(e.baseline_run)), store.get_run(str(e.candidate_run))
    store.check_run(baseline)  # the columns the noise is computed from, against the cassettes' events
    store.check_run(candidate)
    vdoc = verified_verdict(store, str(e.verdict_id))  # derived, never trusted
    excluded = dict(sorted((vdoc.verdict.get("excluded") or {}).items()))  # from its certificates
    row["attribution"] = _attribution(store, vdoc, baseline, candidate)
    if extra is not None:
        baseline = _with(baseline, extra.run(baseline.harness_sha, progress))
        candidate = _with(candidate, extra.run(candidate.harness_sha, progress))
    found = noise(baseline, candidate, excluded, score)
    row["margin"], row["noise_floor"] = found["margin"], found["noise_floor"]
    row["within_noise"], row["interval"] = found["within_noise"], found["interval"]
    row["seed_flip_rate"], row["excluded"] = found["seed_flip_rate"], excluded
    row["seeds"] = sorted({int(x.seed) for x in baseline.episodes})
    row["baseline"], row["candidate"] = _side(store, baseline), _side(store, candidate)
    pair = paired(baseline, candidate, excluded)
    row["paired"], row["p_value"] = pair, pair["mcnemar_p_better"]
    return row


def with_holm(epochs: list[EpochNoise]) -> list[int]:
    """Each judged epoch's ``p_holm`` (Holm over the training's judged epochs); the accepted
    epochs still significant at 0.05 once adjusted."""
    judged = [r for r in epochs if r["p_value"] is not None]
    for r, adjusted in zip(judged, holm([float(r["p_value"] or 0.0) for r in judged]), strict=True):
        r["p_holm"] = adjusted
    return [r["epoch"] for r in judged if r["decision"] == "accepted" and (r["p_holm"] or 1.0) <= 0.05]


def noise_audit(
    store: StoreBackend,
    training_id: str,
    resample_seeds: int | None = None,
    live: bool = False,
    progress: Progress | None = None,
) -> NoiseAudit:
    """Every epoch of a recorded training with its noise floor (see the module doc)."""
    doc = verified_training(store, training_id, bundle=False)
    if resample_seeds is not None and resample_seeds < 1:
        raise ConfigError(f"--resample-seeds {resample_seeds}: give a number of extra seeds >= 1")
    if not doc.runs:
        raise ConfigError(f"training {training_id} has no measured run; nothing to audit")
    criterion = doc.criterion["name"]
    score: Score = "reward" if criterion == "mean_reward" else "solved"
    extra = ExtraSeeds(store, doc, resample_seeds, live) if resample_seeds else None
    epochs = [_epoch(store, e, score, extra, progress) for e in doc.epochs]
    significant = with_holm(epochs)
    accepted = [r["epoch"] for r in epochs if r["decision"] == "accepted"]
    within = [r["epoch"] for r in epochs if r["decision"] == "accepted" and r["within_noise"]]
    incidental = [
        r["epoch"]
        for r in epochs
        if r["decision"] == "accepted"
        and (a := r.get("attribution"))
        and a["wins"]
        and a["wins_incidental"] == a["wins"]
    ]
    judged = sum(1 for r in epochs if r["noise_floor"] is not None)
    return {
        "training_id": doc.training_id,
        "kind": "noise_audit",
        "criterion": criterion,
        "score": score,
        "resampled_seeds": extra.seeds if extra else [],
        "epochs": epochs,
        "accepted": accepted,
        "accepted_within_noise": within,
        "accepted_all_incidental": incidental,
        "accepted_significant": significant,
        "summary": (
            f"{len(within)} of {len(accepted)} accepted epoch(s) within noise, {len(incidental)} whose wins were all "
            f"incidental, {len(significant)} significant after Holm (p ≤ 0.05 over {judged} judged of "
            f"{len(epochs)} epoch(s))"
        ),
    }
