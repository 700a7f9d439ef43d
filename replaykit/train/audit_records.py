"""The shapes of a counterfactual audit (``replaykit audit TRAINING``): one row per
recorded epoch, the episodes it would need recorded, a baseline's solve rate, and the
whole report. ``train/counterfactual.py`` builds them; the CLI prints them as JSON or
renders them (``render/training.py``), sweeps and the HTML report read them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

from replaykit.core.errors import DivergenceReport
from replaykit.core.records import JSON
from replaykit.core.training_doc import AdaptiveRecord, NamedParams, TrainingDoc
from replaykit.core.verdict_doc import VerdictRecord
from replaykit.episodes.run_records import ReplayReport

if TYPE_CHECKING:
    from replaykit.train.attribution import Attribution
    from replaykit.train.stats import Noise, Paired, RunStats


class CounterfactualRow(TypedDict):
    epoch: int
    description: str
    recorded_decision: str  # accepted | rejected | skipped
    recorded_baseline: str
    recorded_candidate: str | None
    counterfactual_baseline: str | None
    counterfactual_candidate: str | None
    counterfactual_decision: str  # accepted | rejected | skipped | unknown | undetermined
    reapplied: bool  # the recorded proposal's diff was re-applied to another baseline
    offline: bool  # decided from cassettes alone
    flipped: bool | None
    reason: str
    verdict: VerdictRecord | None


class NeededEpisode(TypedDict):
    """An episode the counterfactual needs and the store lacks (what ``--record`` records)."""

    epoch: int
    role: str  # baseline | candidate
    task_id: str
    seed: int
    harness_sha: str
    cassette_id: str


class WalkResult(TypedDict):
    rows: list[CounterfactualRow]
    head: str  # the counterfactual baseline branch after the last decided epoch
    blocked_at: int | None  # the first epoch that needs episodes never recorded
    needs_recording: list[NeededEpisode]
    optimizer_state: dict[str, JSON]


class SolveRate(TypedDict):
    sha: str | None
    solved: int | None
    total: int
    solve_rate: float | None


class FinalRate(SolveRate, total=False):
    determined: bool
    last_known: str


class Spec(TypedDict, total=False):
    name: str
    params: dict[str, JSON]
    spec: str  # NAME[:k=v,...]


class ProposalRow(TypedDict):
    epoch: int
    description: str
    has_diff: bool
    reason: str | None


class FinalRates(TypedDict):
    recorded: SolveRate
    counterfactual: FinalRate


class CounterfactualReport(TypedDict):
    training_id: str
    kind: str  # counterfactual
    criterion: Spec
    optimizer: Spec
    recorded_criterion: Spec
    recorded_optimizer: Spec
    same_as_recorded: bool
    approximation: str
    epochs: list[CounterfactualRow]
    flipped: list[int]
    reapplied: list[int]
    diverged_at: int | None
    complete: bool
    offline_epochs: int
    offline_share: float
    accepted: int
    recorded_accepted: int
    final: FinalRates
    reproduces_recorded: bool
    needs_recording: list[NeededEpisode]
    optimizer_state: dict[str, JSON]
    proposals: list[ProposalRow]


class CounterfactualVerdict(TypedDict):
    """What another criterion would have decided on a recorded verdict's two runs."""

    criterion: str
    verdict: VerdictRecord
    differs: bool
    summary: str


class RegradedVerdict(TypedDict):
    """A verdict recomputed with regraded runs in place of the runs they re-graded."""

    replaced: dict[str, str]  # baseline | candidate → the regraded run
    verdict: VerdictRecord
    differs: bool  # the decision differs from the recorded one
    summary: str


class FacetsMoved(TypedDict):
    """Two runs' model calls by facet, and how the calls gone wrong moved (``length 14 → 2``)."""

    baseline: dict[str, int]
    candidate: dict[str, int]
    moved: str  # "" when no count of a call gone wrong moved


class VerdictAudit(TypedDict):
    """``replaykit audit VERDICT``: the verdict recomputed from its stored runs."""

    verdict_id: str
    training_id: str | None
    epoch: int | None
    baseline_sha: str
    candidate_sha: str | None
    recorded: VerdictRecord
    recomputed: VerdictRecord
    reproduced: bool
    counterfactual: NotRequired[CounterfactualVerdict]
    noise: NotRequired[Noise]  # the margin, its seeded bootstrap interval and noise floor (train/stats.py)
    replicates: NotRequired[dict[str, RunStats]]  # baseline and candidate
    paired: NotRequired[Paired]  # difference, interval, exact McNemar, mde (train/stats.py)
    facets: NotRequired[FacetsMoved]  # both runs' calls by facet (cassette/facets.py)
    attribution: NotRequired[Attribution]  # every flip attributed or incidental (train/attribution.py)
    regraded: NotRequired[RegradedVerdict]  # recomputed on regraded runs (``--regraded RUN``)
    adaptive: NotRequired[AdaptiveRecord]  # adaptive seeds' stopping points (train/adaptive.py)


class EpochReplay(TypedDict):
    epoch: int
    candidate_sha: str | None
    replayed_candidate_sha: str | None
    decision: str
    replayed_decision: str
    identical: bool
    differs_in: list[str]  # the fields that differ (candidate_sha, decision, loss, skipped, verdict)


class RunReplay(TypedDict):
    run_id: str
    identical: bool
    divergence: DivergenceReport | None


class DocumentReplay(TypedDict):
    """``replaykit replay ID`` of a verdict, compare or transfer document: recomputed, then every
    run it reads replayed; identical when every one is."""

    id: str
    kind: str
    identical: bool
    runs: list[ReplayReport]


class TrainingClaims(TypedDict, total=False):
    """The reuse claims of a training's distinct episodes, each checked against its donor."""

    claims_checked: int
    claims_unchecked: list[str]  # cassettes whose claimed donor is not in the store


class TrainingReplay(TrainingClaims):
    """``replaykit replay TRAINING``: each epoch and run replayed offline, and the final baseline."""

    training_id: str
    identical: bool
    final_baseline: str
    replayed_final_baseline: str
    epochs: list[EpochReplay]
    runs: list[RunReplay]


class SweepCell(TypedDict):
    """One (criterion, optimizer) of a sweep: how its counterfactual training ends."""

    criterion: str  # NAME[:k=v,...]
    optimizer: str
    recorded: bool  # the pair the training was recorded with
    accepted_epochs: list[int]
    accepted: int
    flipped: list[int]
    complete: bool
    final_baseline: str | None
    last_known_baseline: str
    final_solved: int | None
    final_total: int
    final_solve_rate: float | None
    offline_share: float
    needs_recording: int  # episodes never recorded that the walk would need
    p_value: float | None  # exact one-sided McNemar: the final baseline solves more than the initial
    p_bh: float | None  # p_value adjusted over the sweep's cells (Benjamini-Hochberg)


class SweepReport(TypedDict):
    """``replaykit audit TRAINING --sweep``: one cell per criterion × optimizer."""

    training_id: str
    kind: str  # sweep
    criteria: list[str]
    optimizers: list[str]
    recorded_final: SolveRate
    cells: list[SweepCell]


class SeedSample(TypedDict):
    seeds: list[int]
    accept: bool
    holds: bool  # the same decision as on every seed
    loss: float
    reason: str


class SeedRobustness(TypedDict):
    """``replaykit audit VERDICT --resample-seeds K``: does the decision hold on fewer seeds?"""

    verdict_id: str
    kind: str  # seed_robustness
    training_id: str | None
    epoch: int | None
    criterion: NamedParams
    recorded_accept: bool
    accept: bool
    seeds: list[int]
    k: int
    method: str  # subsets | bootstrap
    samples: list[SeedSample]
    holds: int
    total: int
    share: float
    summary: str


class RecordedAudit(CounterfactualReport):
    """``audit TRAINING --record --json``: the audit, and the live training it recorded."""

    recorded_training: str
    recorded_branch: str


class RecordedCounterfactual(TypedDict):
    """``audit TRAINING --record``: the live counterfactual training and the offline audit after it."""

    training: TrainingDoc
    audit: CounterfactualReport
