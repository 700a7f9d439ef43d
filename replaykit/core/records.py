"""Typed records: the documents several modules read.

The store keeps documents as canonical JSON. A run (``RunDoc``, kind ``measure``) and its rows
are one pydantic model each, in ``core/run_doc.py`` (deprecated aliases here), and so is a
verdict (``VerdictDoc``, what ``loss.backward()`` records, and the ``VerdictRecord`` it holds:
``core/verdict_doc.py``); the TypedDicts here name the other stored JSON (a training, a compare
result; an episode's ``meta`` is ``core/meta.py``'s ``EpisodeMeta``).
Stored JSON is canonical (sorted keys), so field order here is only for reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NotRequired, TypedDict

if TYPE_CHECKING:
    from replaykit.core.verdict_doc import VerdictRecord

#: a JSON value as stored (canonical JSON): what parameters and metrics may hold
#: (read-only containers, so a ``list[str]`` is one)
JSON = str | int | float | bool | None | Sequence["JSON"] | Mapping[str, "JSON"]


class ModelDoc(TypedDict):
    """A model's identity in a run document (``keys.ModelId``)."""

    name: str
    endpoint: str
    revision: NotRequired[str]


class PanelRuns(TypedDict):
    """One panel's runs in an epoch (``train.panels``; None: not measured)."""

    baseline_run: str | None
    candidate_run: str | None


class TestsRecord(TypedDict):
    """``train.candidate_tests`` run on a candidate (``train.gates``)."""

    command: str
    exit_code: int  # -1: timed out
    output: str  # its output's tail


class AdaptiveRecord(TypedDict):
    """An adaptive epoch's stopping points (``train/adaptive.py``)."""

    min: int
    max: int
    start: int
    alpha: float  # the level the rounds stopped at
    rounds: int  # rounds of one more seed
    stopped: str  # futile | concordant | max
    seeds: dict[str, int]  # task id -> the seeds it was measured on (from ``start``, in order)
    episodes: int  # both runs' episodes on the deciding panel


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
    workspace_digest: NotRequired[str]  # the proposer's workspace (train/workspace.py), keying its proposal
    adaptive: NotRequired[AdaptiveRecord]  # panel.seeds: {adaptive: …}: the stopping points


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


def __getattr__(name: str) -> object:
    """``RunDoc`` and ``EpisodeSummary`` moved to ``core/run_doc.py``, ``VerdictDoc`` and
    ``VerdictRecord`` to ``core/verdict_doc.py`` (deprecated aliases)."""
    from replaykit.core.deprecation import moved_name

    return moved_name(__name__, name)
