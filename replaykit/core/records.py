"""Typed records: the documents several modules read, as dataclasses.

The store keeps documents as canonical JSON; these give them a shape on the way in
(``to_dict``) and on the way out (``from_dict``): a run (``RunDoc``, kind
``measure``; what ``Store.get_run`` returns) and its per-episode rows
(``EpisodeSummary``), a verdict (``VerdictDoc``, what ``loss.backward()`` records);
the TypedDicts name the stored JSON itself (a run, a training, a verdict, a compare result;
an episode's ``meta`` is ``core/meta.py``'s ``EpisodeMeta``).
Stored JSON is canonical (sorted keys), so field order here is only for reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

#: a JSON value as stored (canonical JSON): what parameters and metrics may hold
#: (read-only containers, so a ``list[str]`` is one)
JSON = str | int | float | bool | None | Sequence["JSON"] | Mapping[str, "JSON"]


class EpisodeRow(TypedDict):
    """One (task, seed) row of a run document; only ``task_id`` and ``seed`` are required
    of rows criteria are handed by tests and older documents."""

    task_id: str
    seed: int | str
    cassette_id: NotRequired[str]
    reward: NotRequired[float | None]
    passed: NotRequired[bool]
    infra_failure: NotRequired[bool]
    steps: NotRequired[int]
    llm_calls: NotRequired[int]
    tokens: NotRequired[int]
    digest: NotRequired[str]
    reused_events: NotRequired[int]  # events 0..n-1 served from a donor (absent: none)
    model_calls: NotRequired[int]  # calls that reached the endpoint (absent: all of llm_calls)
    reused: NotRequired[bool]  # in ``replaykit run``'s report: its cassette was reused, not recorded
    error: NotRequired[str]  # in ``run``'s report: the exception type its harness raised
    outcome: NotRequired[
        str
    ]  # in ``run``'s report: its class, derived from its events (cassette/outcomes.py)
    limit: NotRequired[str]  # in ``run``'s report: the framework limit it reached
    call_facets: NotRequired[dict[str, int]]  # in ``run``'s report: its calls by facet (cassette/facets.py)
    ended_by: NotRequired[str]  # in ``run``'s report: the facet of the call gone wrong that ended it
    reason: NotRequired[str]  # in ``run``'s report: why an infra episode was not graded


class ModelDoc(TypedDict):
    """A model's identity in a run document (``keys.ModelId``)."""

    name: str
    endpoint: str
    revision: NotRequired[str]


class PanelDoc(TypedDict, total=False):
    tasks: list[str]
    seeds: list[int | str]  # ints as measured; the row labels of a resampled audit otherwise


class RunDocument(TypedDict):
    """A run as stored (``RunDoc.to_dict``)."""

    run_id: str
    kind: NotRequired[str]
    name: NotRequired[str]
    harness_sha: str
    harness_repo: NotRequired[str]
    model: ModelDoc
    config_digest: str
    panel: NotRequired[PanelDoc]
    cassettes: list[str]
    episodes: list[EpisodeRow]
    solved: NotRequired[int]
    total: NotRequired[int]
    reuse_basis: NotRequired[str]  # some episode was served a donor's events: exact | shared sample
    regraded_from: NotRequired[str]  # the run whose episodes this one re-graded (``replaykit regrade``)
    #: its task folders as store trees (``core.tree_digest``): bundles carry them
    trees: NotRequired[list[str]]


class VerdictRecord(TypedDict):
    """A criterion's verdict as stored (``train.verdicts.Verdict.to_dict``)."""

    criterion: str
    params: dict[str, JSON]
    accept: bool
    loss: float
    reason: str
    regressions: list[str]
    new_solves: list[str]
    excluded: dict[str, str]
    metrics: dict[str, JSON]


class PanelRuns(TypedDict):
    """One panel's runs in an epoch (``train.panels``; None: not measured)."""

    baseline_run: str | None
    candidate_run: str | None


class TestsRecord(TypedDict):
    """``train.candidate_tests`` run on a candidate (``train.gates``)."""

    command: str
    exit_code: int  # -1: timed out
    output: str  # its output's tail


class EpochRecord(TypedDict):
    """One epoch of a training document (``train.loss.Loss.to_dict``)."""

    epoch: int
    baseline_sha: str
    baseline_run: str | None
    candidate_sha: str | None
    candidate_run: str | None
    description: str
    skipped: str | None
    proposal_cassette: str | None
    changed: list[str]
    verdict_id: str | None
    verdict: VerdictRecord | None
    loss: float | None
    decision: str  # accepted | rejected | skipped
    promoted: NotRequired[bool | None]
    panels: NotRequired[dict[str, PanelRuns]]  # format 2: train (and val, test) runs
    smoke: NotRequired[list[str]]  # format 2: the candidate's smoke episodes (cassette ids)
    candidate_tests: NotRequired[TestsRecord]  # format 2, with train.candidate_tests


class NamedParams(TypedDict):
    name: str
    params: dict[str, JSON]


class PatchQueueDoc(TypedDict):
    diffs: list[str]  # blob ids of the diff texts
    descriptions: list[str]


class CounterfactualOf(TypedDict):
    """What a recorded counterfactual training re-judged: the training, and with what."""

    training_id: str
    criterion: NamedParams
    optimizer: NamedParams
    branch: NotRequired[str]


class TrainingDocument(TypedDict):
    """A training as stored (``train.documents.training_summary`` plus its blobs)."""

    training_id: str
    kind: str
    name: str
    spec_digest: str
    harness_repo: str
    branch: str
    initial_sha: str
    final_baseline: str
    chain: list[str]
    epochs: list[EpochRecord]
    runs: list[str]
    verdicts: list[str]
    cassettes: list[str]
    trees: list[str]
    estimator: dict[str, JSON]
    criterion: NamedParams
    optimizer: NamedParams
    model: ModelDoc
    config: dict[str, JSON]  # the RunConfig, as JSON
    config_base_dir: str
    initial_bundle: NotRequired[str]
    blobs: NotRequired[list[str]]
    patch_queue: NotRequired[PatchQueueDoc]
    counterfactual_of: NotRequired[CounterfactualOf]
    format: NotRequired[int]  # 2: panels, the smoke gate, the breaker (absent: format 1)


class VerdictDocument(TypedDict):
    verdict_id: str
    kind: str
    training_id: str
    epoch: int
    baseline_run: str
    candidate_run: str | None
    baseline_sha: str
    candidate_sha: str | None
    runs: list[str | None]
    trees: list[str | None]
    verdict: VerdictRecord
    #: the forked certificates its exclusions come from (absent in verdicts recorded before)
    certificates: NotRequired[list[str]]
    #: every certificate of its baseline's tasks (a training with ``train.certify: every_epoch``)
    certified: NotRequired[list[str]]


class CompareCell(TypedDict):
    """One harness × model cell: its run and solve rate (``recorded``/``reused``: this
    invocation's cassettes, never stored)."""

    harness: str
    harness_sha: str
    model: str
    run_id: str
    solved: int
    total: int
    solve_rate: float
    recorded: NotRequired[int]
    reused: NotRequired[int]
    model_calls: NotRequired[int]  # requests this invocation sent to the endpoint
    reused_events: NotRequired[int]  # events its new episodes were served from donors instead


class CompareDocument(TypedDict):
    """A compare result as stored (kind ``compare``) and as ``episodes.compare.compare`` returns it."""

    kind: str
    name: str
    models: list[str]
    harnesses: list[str]
    cells: list[CompareCell]
    runs: list[str]
    trees: list[str]
    compare_id: str
    model_calls: NotRequired[int]  # this invocation's (``compare`` returns them; never stored)
    reused_events: NotRequired[int]


@dataclass(frozen=True)
class EpisodeSummary:
    """One (task, seed) row of a run."""

    task_id: str
    seed: int | str  # an int in stored runs; audits label resampled instances (e.g. "1~0")
    cassette_id: str = ""
    reward: float | None = None
    passed: bool = False
    infra_failure: bool = False
    steps: int = 0
    llm_calls: int = 0
    tokens: int = 0
    digest: str = ""
    reused_events: int = 0  # events served from a donor cassette (prefix reuse, a fork's parent)
    model_calls: int | None = None  # calls that reached the endpoint (None: every one of llm_calls)

    @property
    def unit(self) -> str:
        """A task instance, written ``task#seed``."""
        return f"{self.task_id}#{self.seed}"

    @classmethod
    def from_dict(cls, data: EpisodeRow) -> EpisodeSummary:
        return cls(
            task_id=str(data["task_id"]),
            seed=data["seed"],
            cassette_id=str(data.get("cassette_id", "")),
            reward=None if (reward := data.get("reward")) is None else float(reward),
            passed=bool(data.get("passed")),
            infra_failure=bool(data.get("infra_failure")),
            steps=int(data.get("steps") or 0),
            llm_calls=int(data.get("llm_calls") or 0),
            tokens=int(data.get("tokens") or 0),
            digest=str(data.get("digest", "")),
            reused_events=int(data.get("reused_events") or 0),
            model_calls=None if (calls := data.get("model_calls")) is None else int(calls),
        )

    @property
    def paid_calls(self) -> int:
        """The model calls recording this episode sent to the endpoint."""
        return self.llm_calls if self.model_calls is None else self.model_calls

    def to_dict(self) -> EpisodeRow:
        row = EpisodeRow(
            task_id=self.task_id,
            seed=self.seed,
            cassette_id=self.cassette_id,
            reward=self.reward,
            passed=self.passed,
            infra_failure=self.infra_failure,
            steps=self.steps,
            llm_calls=self.llm_calls,
            tokens=self.tokens,
            digest=self.digest,
        )
        if self.reused_events:  # only then: the rows of runs recorded without reuse stay as they were
            row["reused_events"] = self.reused_events
            row["model_calls"] = self.paid_calls
        return row


@dataclass(frozen=True)
class RunDoc:
    """A measured panel: one harness SHA × one model × tasks × seeds."""

    run_id: str
    name: str
    harness_sha: str
    harness_repo: str
    model: ModelDoc
    config_digest: str
    panel: PanelDoc
    cassettes: list[str]
    episodes: list[EpisodeSummary] = field(default_factory=list)
    kind: str = "measure"
    reuse_basis: str = ""  # exact | shared sample, when some episode was served a donor's events
    regraded_from: str = ""  # ``replaykit regrade``: the run re-graded (stored only when set)
    trees: list[str] = field(default_factory=list)  # its task folders as store trees (stored when any)

    @property
    def solved(self) -> int:
        return sum(1 for e in self.episodes if e.passed)

    @property
    def total(self) -> int:
        return len(self.episodes)

    @classmethod
    def from_dict(cls, data: RunDocument) -> RunDoc:
        return cls(
            run_id=data["run_id"],
            name=data.get("name", ""),
            harness_sha=data["harness_sha"],
            harness_repo=data.get("harness_repo", ""),
            model=data["model"],
            config_digest=data["config_digest"],
            panel=data.get("panel") or {},
            cassettes=list(data["cassettes"]),
            episodes=[EpisodeSummary.from_dict(e) for e in data["episodes"]],
            kind=data.get("kind", "measure"),
            reuse_basis=str(data.get("reuse_basis") or ""),
            regraded_from=str(data.get("regraded_from") or ""),
            trees=list(data.get("trees") or []),
        )

    @property
    def model_calls(self) -> int:
        """The model calls recording this run's episodes sent to the endpoint."""
        return sum(e.paid_calls for e in self.episodes)

    @property
    def reused_events(self) -> int:
        """The events its episodes were served from donor cassettes instead."""
        return sum(e.reused_events for e in self.episodes)

    def to_dict(self) -> RunDocument:
        doc: RunDocument = {
            "run_id": self.run_id,
            "kind": self.kind,
            "name": self.name,
            "harness_sha": self.harness_sha,
            "harness_repo": self.harness_repo,
            "model": self.model,
            "config_digest": self.config_digest,
            "panel": self.panel,
            "cassettes": self.cassettes,
            "episodes": [e.to_dict() for e in self.episodes],
            "solved": self.solved,
            "total": self.total,
        }
        if self.reuse_basis:
            doc["reuse_basis"] = self.reuse_basis
        if self.regraded_from:
            doc["regraded_from"] = self.regraded_from
        if self.trees:
            doc["trees"] = list(self.trees)
        return doc


@dataclass(frozen=True)
class VerdictDoc:
    """A recorded verdict: (baseline run, candidate run, criterion) → the Verdict, with its evidence."""

    verdict_id: str
    training_id: str
    epoch: int
    baseline_run: str
    candidate_run: str | None
    baseline_sha: str
    candidate_sha: str | None
    verdict: VerdictRecord
    kind: str = "verdict"
    certificates: list[str] = field(default_factory=list)
    certified: list[str] | None = None  # every certificate of the baseline (train.certify: every_epoch)

    def to_dict(self) -> VerdictDocument:
        doc: VerdictDocument = {
            "verdict_id": self.verdict_id,
            "kind": self.kind,
            "training_id": self.training_id,
            "epoch": self.epoch,
            "baseline_run": self.baseline_run,
            "candidate_run": self.candidate_run,
            "baseline_sha": self.baseline_sha,
            "candidate_sha": self.candidate_sha,
            "runs": [self.baseline_run, self.candidate_run],
            "trees": [self.baseline_sha, self.candidate_sha],
            "verdict": self.verdict,
            "certificates": sorted(self.certificates),
        }
        if self.certified is not None:  # only then: verdicts of other trainings stay as they were
            doc["certified"] = sorted(self.certified)
        return doc
