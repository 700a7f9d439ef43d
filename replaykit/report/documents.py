"""The JSON-ready documents the report layer hands out: transcript turns, episode diffs, a report.

A transcript is a list of turns, each with a ``kind`` (``call``, ``env``, ``error``,
``grade``); a diff aligns two episodes and names their first difference. These are what
``cassettes show --transcript --json`` and ``cassettes diff --json`` print.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Literal, NotRequired, TypedDict, TypeVar

from replaykit.core.compare_doc import CompareCell
from replaykit.core.records import JSON
from replaykit.core.run_doc import EpisodeSummary, ModelRef
from replaykit.core.training_doc import NamedParams
from replaykit.envs.results import GradeDoc
from replaykit.episodes.views import EnvStep, ShownError
from replaykit.train.intervals import Movement, Rate
from replaykit.train.panels import Gaps, PanelView
from replaykit.train.transfer_doc import TransferHarness

Cell = TypeVar("Cell")

if TYPE_CHECKING:
    from replaykit.models.probe import ProbeResult
    from replaykit.train.audit_records import SweepReport
    from replaykit.train.evidence import VerdictEvidence


class ToolCall(TypedDict):
    id: str
    name: str
    arguments: str


class Message(TypedDict):
    """One message of a conversation, whatever API carried it (chat or Responses)."""

    role: str
    content: str
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]
    capped: NotRequired[int]  # the viewer's cut: characters of ``content`` hidden


class Reply(TypedDict):
    """What one call answered (``parse_response``)."""

    status: int
    stream: bool
    messages: list[Message]
    usage: JSON  # the endpoint's usage object, as sent (None when absent)
    system_fingerprint: JSON
    chunks: NotRequired[JSON]
    error: NotRequired[str]
    model: NotRequired[JSON]


class EpisodeBrief(TypedDict):
    """Who an episode is (``episode_summary``): its key's fields, digest and sizes."""

    id: str
    task_id: str
    seed: int
    model: str
    harness_sha: str
    kind: str
    digest: str
    tokens: int
    llm_calls: int
    steps: int
    call_facets: dict[str, int]  # its calls by facet (cassette/facets.py), derived from their bytes
    ended_by: str | None  # the facet of the call gone wrong that ended it, if one did


class CallTurn(TypedDict):
    kind: Literal["call"]
    position: int
    call: int
    method: str
    path: str
    settings: dict[str, JSON]
    folded: int
    sent: int
    new: list[Message]
    reply: list[Message]
    status: int
    stream: bool
    chunks: JSON
    usage: JSON
    system_fingerprint: JSON
    error: str | None
    facet: str | None  # what the answer was (cassette/facets.py); None: no answer


class EnvTurn(EnvStep):
    stdout_capped: NotRequired[int]  # the viewer's cut: characters hidden
    stderr_capped: NotRequired[int]


class GradeTurn(GradeDoc):
    kind: Literal["grade"]
    position: int


Turn = CallTurn | EnvTurn | ShownError | GradeTurn  # an error as `cassettes show` shows it


class TranscriptDoc(TypedDict):
    """``cassettes show ID --transcript``."""

    episode: EpisodeBrief
    turns: list[Turn]


class SideRow(TypedDict):
    tag: str  # equal | replace | delete | insert | skip
    a: str | None
    b: str | None


class TurnLines(TypedDict):
    """One turn of a transcript as a title and plain lines (``report/sides.py``)."""

    position: int  # the event it is
    kind: str  # call | env | error | grade
    title: str
    lines: list[str]


class TurnPair(TypedDict):
    """A turn of each side, paired by kind after the first difference (None: that side has none there)."""

    a: TurnLines | None
    b: TurnLines | None
    same: bool
    rows: list[SideRow]  # every line of both, marked where they differ


class SidesDoc(TypedDict):
    """Two transcripts side by side (``report.sides.transcripts_side_by_side``)."""

    shared: list[TurnLines]  # before the first difference: identical in both
    pairs: list[TurnPair]
    hunks: int  # pairs that differ


class AlignedRow(TypedDict):
    position: int
    a: str
    b: str
    index: int
    same: bool
    part: str | None


class FirstDifference(TypedDict):
    position: int
    kind: str
    index: int
    part: str
    label: str
    a_lines: list[str]
    b_lines: list[str]
    unified: list[str]
    side_by_side: list[SideRow]


class ForkPoint(TypedDict):
    """Where one side of a diff forked from the other (``replaykit fork``): its step, the event
    its first live call is (everything before it was served from, or repeats, the parent)."""

    fork: str  # a | b
    step: int  # the parent's model calls it was served (--at)
    at: str  # "call 2 of 3": its first live call, of the parent's model calls (core/glossary.fork_call)
    position: int


class EpisodeDiff(TypedDict):
    """Two episodes aligned (``diff_episodes``); a verdict's units leave ``aligned`` out."""

    a: EpisodeBrief
    b: EpisodeBrief
    identical: bool
    shared_prefix: int
    first_difference: FirstDifference | None
    aligned: NotRequired[list[AlignedRow]]
    grades: list[GradeDoc | None]
    fork_point: NotRequired[ForkPoint]  # one side is a fork of the other


class UnitDiff(EpisodeDiff):
    unit: str
    movement: str  # new solve | regression | unchanged


class VerdictDiff(TypedDict):
    """``cassettes diff VERDICT``: the baseline vs candidate episode of each moved unit."""

    verdict_id: str
    accept: bool
    reason: str
    baseline_sha: str
    candidate_sha: str | None
    units: list[UnitDiff]


# -- the report's model: what ``build.build`` hands the template (``report --json`` prints
#    its summary, ``html.ReportSummary``) --------------------------------------------------


class RunCell(TypedDict):
    """One (task, seed) cell of a run's grid: the run's episode row, linked to its transcript."""

    episode: EpisodeSummary
    anchor: str
    outcome: str  # the class derived from its events (cassette/outcomes.py)


class GridRow(TypedDict):
    task_id: str
    cells: list[RunCell | None]  # one per seed; None where the run has no such episode


class RunPoint(TypedDict):
    """What an epoch row shows of a run."""

    run_id: str
    anchor: str
    solved: int
    total: int
    tokens: int
    steps: int
    infra: int
    per_task: dict[str, float | None]  # task → solve rate over its seeds
    model_calls: int  # requests recording its episodes sent to the endpoint
    reused_events: int  # events its episodes were served from donor cassettes instead
    reuse_basis: str  # exact | shared sample, when some were ("": every event recorded live)


class RunSection(RunPoint):
    """A run's task × seed grid (``Report.run``)."""

    harness_sha: str
    model: str
    endpoint: str
    seeds: list[int | str]
    grid: list[GridRow]


class TranscriptSection(TypedDict):
    anchor: str
    episode: EpisodeBrief
    turns: list[Turn]
    meta_kind: JSON  # the episode's meta ``kind``, else its key's
    outcome: str  # its outcome class (solved, verified_rejected, hit_step_cap, …), from its events


class DiffSection(EpisodeDiff):
    """A moved unit's two episodes at their first difference (``aligned`` left out)."""

    anchor: str
    unit: str
    verdict_id: str
    a_anchor: str
    b_anchor: str


class MovementRow(TypedDict):
    unit: str
    movement: str  # new solve | regression
    anchor: str | None  # the unit's diff; None when a run lacks the unit's episode


class VerdictSection(TypedDict):
    verdict_id: str
    anchor: str
    epoch: int | None
    baseline_sha: str
    candidate_sha: str | None
    accept: bool
    criterion: str
    loss: float
    reason: str
    movement: list[MovementRow]
    baseline_run: str  # anchors of the runs' sections
    candidate_run: str
    code_diff: list[str] | None
    evidence: VerdictEvidence  # its noise, both runs' replicates, each flip attributed or incidental


class EpochSection(TypedDict):
    epoch: int
    decision: str
    description: str
    skipped: str | None
    baseline_sha: str
    candidate_sha: str | None
    loss: float | None
    baseline: RunPoint
    candidate: RunPoint | None
    proposal: str | None  # the proposal's transcript anchor, when its cassette is stored
    verdict: VerdictSection | None
    code_diff: list[str] | None
    anchor: str
    panels: dict[str, PanelView]  # train (val, test): runs, rates, movement (``train.panels``)
    gap: Gaps | None  # the baseline's val − train, test − val


class TrainingSection(TypedDict):
    training_id: str
    name: str
    initial_sha: str
    final_baseline: str
    branch: str
    epochs: list[EpochSection]
    verdicts: list[VerdictSection]
    criterion: NamedParams
    false_accept: str  # the criterion's false-accept rate as benchmarks/null_trainings.py measured it
    model: ModelRef
    accepted: int
    rejected: int
    skipped: int
    sweep: SweepReport | None
    panels: list[str]  # the panels it measured, when more than the training panel


class CompareSectionCell(CompareCell):
    run: str  # the anchor of the cell's run
    interval: list[float]  # its solve rate's seeded bootstrap interval [low, high] (the chart's error bar)


class CompareRow(TypedDict, Generic[Cell]):
    """A harness's row of a compare grid: the report's (``CompareSectionCell``) and the viewer's (``CompareCell``)."""

    harness: str
    harness_sha: str
    cells: list[Cell | None]  # one per model


class CompareSection(TypedDict):
    compare_id: str
    models: list[str]
    rows: list[CompareRow[CompareSectionCell]]


class TransferSectionCell(Rate):
    role: str
    run: str  # the anchor of its run's grid
    against_untrained: Movement | None


class TransferSectionRow(TypedDict):
    config: str
    model: str
    cells: list[TransferSectionCell | None]  # one per harness role


class TransferSection(TypedDict):
    transfer_id: str
    training_id: str
    harnesses: list[TransferHarness]
    rows: list[TransferSectionRow]


class ReportContext(TypedDict):
    """The whole report: one of training/verdict/compare/run (by ``kind``), the probes of its
    models, and every run, diff and transcript its sections link to."""

    kind: str
    id: str
    title: str
    training: TrainingSection | None
    verdict: VerdictSection | None
    compare: CompareSection | None
    transfer: TransferSection | None
    run: RunSection | None
    probes: list[ProbeResult]
    runs: list[RunSection]
    diffs: list[DiffSection]
    transcripts: list[TranscriptSection]
