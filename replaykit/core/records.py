"""Typed records: the documents several modules read.

The store keeps documents as canonical JSON. A run (``RunDoc``, kind ``measure``; what
``Store.get_run`` returns) and its per-episode rows (``EpisodeSummary``) are one pydantic model
each (``core/document.py``: ``RunDoc.read`` a stored one, ``to_json`` what the store writes);
a verdict (``VerdictDoc``, what ``loss.backward()`` records) is still a dataclass with
``to_dict``/``from_dict``, and the TypedDicts name the other stored JSON (a training, a verdict,
a compare result; an episode's ``meta`` is ``core/meta.py``'s ``EpisodeMeta``).
Stored JSON is canonical (sorted keys), so field order here is only for reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, NotRequired, TypedDict

from pydantic import ConfigDict, Field

from replaykit.core.document import Document, Real, Stored, WhenSet

#: a JSON value as stored (canonical JSON): what parameters and metrics may hold
#: (read-only containers, so a ``list[str]`` is one)
JSON = str | int | float | bool | None | Sequence["JSON"] | Mapping[str, "JSON"]


class ModelDoc(TypedDict):
    """A model's identity in a run document (``keys.ModelId``)."""

    name: str
    endpoint: str
    revision: NotRequired[str]


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


class EpisodeSummary(Stored):
    """One (task, seed) row of a run: what its episode gave, as its cassette's columns hold it
    (checked against them on every read: ``cassette/integrity.py``)."""

    model_config = ConfigDict(frozen=True)

    task_id: str = Field(description="The task, by its folder name.")
    seed: int | str = Field(
        description='The seed: an int in stored runs; audits label resampled instances (e.g. "1~0").'
    )
    cassette_id: str = Field(default="", description="The episode's cassette (the hash of its key).")
    reward: Real | None = Field(default=None, description="The verifier's reward (none: not graded).")
    passed: bool = Field(default=False, description="The verifier passed it.")
    infra_failure: bool = Field(
        default=False, description="An infrastructure failure: never graded, never counted."
    )
    steps: int = Field(default=0, description="Environment steps (actions) taken.")
    llm_calls: int = Field(default=0, description="Model calls made (served from a donor included).")
    tokens: int = Field(default=0, description="Tokens the model calls used, as the endpoint counted them.")
    digest: str = Field(default="", description="The episode's digest (sha256 over its canonical events).")
    reused_events: Annotated[int, WhenSet] = Field(
        default=0, description="Events 0..n-1 served from a donor cassette (prefix reuse, a fork's parent)."
    )
    model_calls: Annotated[int | None, WhenSet] = Field(
        default=None,
        description="Calls that reached the endpoint (stored with reused_events; absent: every one of llm_calls).",
    )

    def _built(self) -> None:
        """A row of a reusing episode holds what it paid, and only then (the rows of runs
        recorded without reuse stay as they were)."""
        self._set(
            "model_calls", self.paid_calls if self.reused_events else None, held=bool(self.reused_events)
        )

    @property
    def unit(self) -> str:
        """A task instance, written ``task#seed``."""
        return f"{self.task_id}#{self.seed}"

    @property
    def paid_calls(self) -> int:
        """The model calls recording this episode sent to the endpoint."""
        return self.llm_calls if self.model_calls is None else self.model_calls


class ModelRef(Stored):
    """A model as documents name it (``keys.ModelId.to_doc()``: what its cassette keys hold)."""

    name: str = Field(description="The model's name, as the endpoint knows it.")
    endpoint: str = Field(
        description="What serves it: builtin, engine:<digest> (a measured engine identity) or a hosted API's URL."
    )
    revision: str = Field(default="", description="A declared revision (empty: none).")


class Panel(Stored):
    """The tasks and seeds a run measured (as the config named them)."""

    tasks: list[str] = Field(default_factory=list, description="The tasks, by folder name.")
    seeds: list[int | str] = Field(
        default_factory=list,
        description="The seeds (ints as measured; a resampled audit's row labels otherwise).",
    )


class RunDoc(Document):
    """A run (kind ``measure``): one harness SHA × one model × a panel, measured; it lists its
    cassettes and one row per (task, seed). What ``Store.get_run`` returns."""

    run_id: str = Field(
        description="The run's id: a hash of its harness SHA, model, panel and config digest."
    )
    kind: str = Field(default="measure", description="The document kind (always measure).")
    name: str = Field(default="", description="The config's name.")
    harness_sha: str = Field(description="The harness commit measured.")
    harness_repo: str = Field(default="", description="Where the harness repo was when it was measured.")
    model: ModelRef = Field(
        description="The model's identity (name, endpoint, revision), as cassette keys name it."
    )
    config_digest: str = Field(description="The digest of what in the config changes an episode's behaviour.")
    panel: Panel = Field(default_factory=Panel, description="The tasks and seeds measured.")
    cassettes: list[str] = Field(description="Its episodes' cassettes, in panel order.")
    episodes: list[EpisodeSummary] = Field(default_factory=list, description="One row per (task, seed).")
    solved: int = Field(default=0, description="Episodes the verifier passed (derived from the rows).")
    total: int = Field(default=0, description="Episodes measured (derived from the rows).")
    reuse_basis: Annotated[str, WhenSet] = Field(
        default="",
        description="Some episode was served a donor's events: exact (a deterministic engine) or shared sample.",
    )
    regraded_from: Annotated[str, WhenSet] = Field(
        default="", description="The run whose episodes this one re-graded (replaykit regrade)."
    )
    trees: Annotated[list[str], WhenSet] = Field(
        default_factory=list,
        description="Its task folders as store trees (core.tree_digest): bundles carry them.",
    )

    def _built(self) -> None:
        """``solved`` and ``total`` are derived from the rows."""
        self._set("solved", sum(1 for e in self.episodes if e.passed))
        self._set("total", len(self.episodes))

    def _read(self) -> None:
        """Stored ``solved``/``total`` must be what the rows give (absent in old runs: derived)."""
        solved, total = sum(1 for e in self.episodes if e.passed), len(self.episodes)
        held = self.model_fields_set
        if ("solved" in held and self.solved != solved) or ("total" in held and self.total != total):
            raise ValueError(
                f"its solved/total ({self.solved}/{self.total}) are not its rows' ({solved}/{total})"
            )
        self._set("solved", solved, held="solved" in held)
        self._set("total", total, held="total" in held)

    @property
    def model_calls(self) -> int:
        """The model calls recording this run's episodes sent to the endpoint."""
        return sum(e.paid_calls for e in self.episodes)

    @property
    def reused_events(self) -> int:
        """The events its episodes were served from donor cassettes instead."""
        return sum(e.reused_events for e in self.episodes)


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
