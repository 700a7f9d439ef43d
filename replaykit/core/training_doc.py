"""The training document (kind ``training``) as one pydantic model: ``TrainingDoc``, what
``train/documents.py`` writes after every move of the baseline and ``Store.get_training``
returns, and its parts: an epoch (``EpochRecord``, what ``train.loss.Loss.to_record`` gives),
the criterion and optimizer it was trained with (``NamedParams``), a patch queue's diffs
(``PatchQueueDoc``), what a counterfactual training re-judged (``CounterfactualOf``).

``TrainingDoc.read`` a stored one, ``to_json`` what the store writes (``core/document.py``): a
stored training reads back to its own bytes (an epoch recorded before a field existed stays
without it). ``PanelRuns``, ``TestsRecord`` and ``AdaptiveRecord`` are TypedDicts that pydantic
validates (extra keys kept), as ``VerdictRecord`` is: the audits' and the viewer's JSON hold
them as they are stored.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from replaykit.core.document import Document, Real, Stored, StoredJSON, WhenSet
from replaykit.core.run_doc import ModelRef
from replaykit.core.verdict_doc import VerdictRecord


@with_config(ConfigDict(extra="allow"))
class PanelRuns(TypedDict):
    """One panel's runs in an epoch (``train.panels``; None: not measured)."""

    baseline_run: Annotated[str | None, Field(description="The baseline's run on this panel.")]
    candidate_run: Annotated[
        str | None,
        Field(description="The candidate's run on this panel (test: only an accepted candidate's)."),
    ]


@with_config(ConfigDict(extra="allow"))
class TestsRecord(TypedDict):
    """``train.candidate_tests`` run on a candidate (``train/gates.py``)."""

    command: Annotated[str, Field(description="The command run in the candidate's checkout.")]
    exit_code: Annotated[int, Field(description="Its exit code (-1: it timed out).")]
    output: Annotated[str, Field(description="Its output's tail.")]


@with_config(ConfigDict(extra="allow"))
class AdaptiveRecord(TypedDict):
    """An adaptive epoch's stopping points (``train/adaptive.py``)."""

    min: Annotated[int, Field(description="The fewest seeds a task is measured on.")]
    max: Annotated[int, Field(description="The most seeds a task is measured on.")]
    start: Annotated[int, Field(description="The first seed.")]
    alpha: Annotated[Real, Field(description="The level the rounds stopped at.")]
    rounds: Annotated[int, Field(description="Rounds of one more seed.")]
    stopped: Annotated[str, Field(description="Why the rounds stopped: futile, concordant or max.")]
    seeds: Annotated[
        dict[str, int], Field(description="Each task's number of seeds measured (from start, in order).")
    ]
    episodes: Annotated[int, Field(description="Both runs' episodes on the deciding panel.")]


@with_config(ConfigDict(extra="allow"))
class NamedParams(TypedDict):
    """A criterion or an optimizer, by its registered name and its parameters."""

    name: Annotated[str, Field(description="Its registered name.")]
    params: Annotated[dict[str, StoredJSON], Field(description="Its parameters, as it reports them.")]


class EpochRecord(Stored):
    """One epoch of a training (``train.loss.Loss.to_record``): its baseline and candidate,
    their runs, the verdict and what the optimizer decided."""

    epoch: int = Field(description="The epoch's number, from 0.")
    baseline_sha: str = Field(description="The baseline's harness commit.")
    baseline_run: str | None = Field(description="The baseline's run on the deciding panel.")
    candidate_sha: str | None = Field(description="The candidate's harness commit (none: nothing proposed).")
    candidate_run: str | None = Field(description="The candidate's run on the deciding panel.")
    description: str = Field(description="The proposal's description, in the proposer's words.")
    skipped: str | None = Field(description="Why the epoch judged nothing (an empty or failing proposal).")
    proposal_cassette: str | None = Field(description="The cassette of the proposer's model calls.")
    changed: list[str] = Field(description="The files the proposal changed.")
    verdict_id: str | None = Field(description="The stored verdict (kind verdict) of the epoch.")
    verdict: VerdictRecord | None = Field(description="The criterion's verdict.")
    loss: Real | None = Field(description="The verdict's loss (0 when nothing was judged).")
    decision: str = Field(description="The verdict's decision: accepted, rejected or skipped.")
    promoted: bool | None = Field(
        default=None,
        description="The optimizer moved the baseline to the candidate (absent: recorded before it was stored).",
    )
    panels: Annotated[dict[str, PanelRuns] | None, WhenSet] = Field(
        default=None, description="Format 2: each panel's runs (train, and val, test when configured)."
    )
    smoke: Annotated[list[str] | None, WhenSet] = Field(
        default=None, description="Format 2: the candidate's smoke episodes (cassette ids), when it ran them."
    )
    candidate_tests: Annotated[TestsRecord | None, WhenSet] = Field(
        default=None, description="Format 2: train.candidate_tests run on the candidate, when configured."
    )
    workspace_digest: Annotated[str | None, WhenSet] = Field(
        default=None,
        description="The proposer's workspace (train/workspace.py) its proposal's key holds, when it read one.",
    )
    adaptive: Annotated[AdaptiveRecord | None, WhenSet] = Field(
        default=None, description="Adaptive seeds (panel.seeds: {adaptive: …}): the stopping points."
    )

    def runs(self) -> list[str | None]:
        """Every run the epoch names: its verdict's two and each panel's (``train.panels``)."""
        panels = [r for p in (self.panels or {}).values() for r in (p["baseline_run"], p["candidate_run"])]
        return [self.baseline_run, self.candidate_run, *panels]


class PatchQueueDoc(Stored):
    """A patch queue's proposals (estimator ``patch_queue``): they travel with the training."""

    diffs: list[str] = Field(description="The diff texts, as blob ids, in order.")
    descriptions: list[str] = Field(default_factory=list, description="Each diff's description.")


class CounterfactualOf(Stored):
    """What a recorded counterfactual training re-judged: the training, and with what."""

    training_id: str = Field(description="The training re-judged.")
    criterion: NamedParams = Field(description="The criterion it was re-judged with.")
    optimizer: NamedParams = Field(description="The optimizer it was re-judged with.")
    branch: Annotated[str | None, WhenSet] = Field(
        default=None, description="The branch its baseline chain was written to, when one was asked for."
    )


class TrainingDoc(Document):
    """A training (kind ``training``): the spec, the chain of promoted commits, every epoch, and
    what it references (runs, cassettes, trees, verdicts, blobs), so a bundle exports the whole
    training and ``replaykit replay`` reruns it."""

    training_id: str = Field(
        description="The training's id: a hash of its spec (spec_digest) and first baseline."
    )
    kind: str = Field(default="training", description="The document kind (always training).")
    name: str = Field(description="The config's name.")
    spec_digest: str = Field(
        description="The digest of its spec (config, model, panel, estimator, criterion, optimizer, …): a resumed training has the same."
    )
    harness_repo: str = Field(description="Where the harness repo was when it was trained.")
    branch: str = Field(description="The baseline branch the optimizer moves.")
    initial_sha: str = Field(description="The first baseline's commit.")
    final_baseline: str = Field(description="The baseline's commit after the last epoch.")
    chain: list[str] = Field(description="The baselines, from the first to the last promoted candidate.")
    epochs: list[EpochRecord] = Field(description="Every epoch, in order.")
    runs: list[str] = Field(default_factory=list, description="Every run its epochs name, sorted (derived).")
    verdicts: list[str] = Field(default_factory=list, description="Its epochs' verdicts, in order (derived).")
    cassettes: list[str] = Field(
        default_factory=list,
        description="Its epochs' proposal and smoke cassettes, in order (derived; its runs list their own).",
    )
    trees: list[str] = Field(
        default_factory=list, description="Its epochs' baseline and candidate commits, sorted (derived)."
    )
    estimator: dict[str, StoredJSON] = Field(
        description="The estimator's identity (what proposes candidates)."
    )
    criterion: NamedParams = Field(description="The criterion that judged its epochs.")
    optimizer: NamedParams = Field(description="The optimizer that decided its epochs.")
    model: ModelRef = Field(description="The task model's identity, as cassette keys name it.")
    config: dict[str, StoredJSON] = Field(description="The run config, as JSON.")
    config_base_dir: str = Field(description="The folder the config's relative paths were resolved against.")
    initial_bundle: Annotated[str | None, WhenSet] = Field(
        default=None, description="The blob of the first baseline's git bundle."
    )
    blobs: Annotated[list[str] | None, WhenSet] = Field(
        default=None, description="Every blob it references: its git bundle, a patch queue's diffs."
    )
    patch_queue: Annotated[PatchQueueDoc | None, WhenSet] = Field(
        default=None, description="A patch queue's diffs and descriptions (estimator patch_queue)."
    )
    counterfactual_of: Annotated[CounterfactualOf | None, WhenSet] = Field(
        default=None, description="A recorded counterfactual: the training it re-judged, and with what."
    )
    format: Annotated[int | None, WhenSet] = Field(
        default=None,
        description="2: panels, the smoke gate, the breaker (absent: format 1, recorded before them).",
    )

    def _built(self) -> None:
        """What it references is derived from its epochs."""
        epochs = self.epochs
        self._set("runs", sorted({r for e in epochs for r in e.runs() if r}))
        self._set("verdicts", [v for e in epochs if (v := e.verdict_id)])
        self._set("cassettes", [c for e in epochs for c in (e.proposal_cassette, *(e.smoke or [])) if c])
        self._set("trees", sorted({s for e in epochs for s in (e.baseline_sha, e.candidate_sha) if s}))

    @property
    def training_format(self) -> int:
        """Its training format (1 when absent)."""
        return self.format or 1


__all__ = [
    "AdaptiveRecord",
    "CounterfactualOf",
    "EpochRecord",
    "NamedParams",
    "PanelRuns",
    "PatchQueueDoc",
    "TestsRecord",
    "TrainingDoc",
]
