"""What each viewer page is handed: the typed results of ``queries.py`` and ``trainings.py``
(one per route).

The templates read these keys; the store's rows they are built from (``RunsRow``,
``EpisodeListing``, ``CassetteRow``) and the stored documents (``core/records.py``) are typed
where the store defines them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from replaykit.cassette.store.search import SearchHit
from replaykit.core.compare_doc import CompareCell
from replaykit.core.run_doc import EpisodeSummary
from replaykit.core.training_doc import EpochRecord
from replaykit.episodes.views import Lineage
from replaykit.report.documents import CompareRow, EpisodeBrief
from replaykit.train.evidence import VerdictEvidence
from replaykit.train.panels import Gaps, PanelView

if TYPE_CHECKING:
    from replaykit.cassette.store.browsing import EpisodeFacets, EpisodeFilters, EpisodeListing
    from replaykit.envs.results import GradeDoc
    from replaykit.report.documents import SidesDoc, Turn, UnitDiff, VerdictDiff


class DecisionCount(TypedDict):
    count: int
    epochs: list[int]


class Decisions(TypedDict):
    """Counts per decision and which epochs had each (``accepted 1 (e0)``)."""

    accepted: DecisionCount
    rejected: DecisionCount
    skipped: DecisionCount


class CurvePoint(TypedDict):
    x: int
    y: float
    value: float  # solved instances
    epoch: int


class CurveTick(TypedDict):
    y: float
    value: float  # solved instances at this height


class EpochTick(TypedDict):
    x: int
    label: str  # e0, e1, …
    decision: str  # accepted | rejected | skipped


class Curve(TypedDict):
    """Solved instances per epoch on axes, in SVG coordinates (``view/curve.py``)."""

    width: int
    height: int
    top: float  # the y axis' top value: the panel's size
    left: int  # the plot area: x of the y axis, y of its top and bottom, x of its right end
    plot_top: int
    plot_bottom: int
    plot_right: int
    yticks: list[CurveTick]
    xticks: list[EpochTick]  # every epoch, skipped ones too
    baseline: list[CurvePoint]
    candidate: list[CurvePoint]
    baseline_path: str
    accepted: list[CurvePoint]
    summary: str  # in words: "e0 accepted 7 → 13; e1 rejected 13 → 13; e3 skipped; …"


class TrainingRow(TypedDict):
    id: str
    name: str
    model: str
    created_at: str
    initial_sha: str
    final_baseline: str
    branch: str
    criterion: str
    epochs: list[EpochRecord]
    n_epochs: int
    decisions: Decisions
    units: int | None  # task instances per run, from the first verdict that counted them
    curve: Curve
    corrupt: str  # "store corrupt: …" when its recomputation failed (then the rest is blank)


class TrainingsPage(TypedDict):
    trainings: list[TrainingRow]


class PanelRow(TypedDict):
    """One epoch of a training with held-out panels: each panel's runs and rates, the gaps."""

    epoch: int
    panels: dict[str, PanelView]
    gap: Gaps | None


class TrainingPage(TypedDict):
    training: TrainingRow
    panels: list[str]  # train, val, test: the panels it measured (empty: the training panel only)
    panel_rows: list[PanelRow]


class RunRow(TypedDict):
    id: str
    name: str
    model: str
    harness_sha: str
    created_at: str
    solved: int | None
    total: int | None
    episodes: int
    steps: int
    tokens: int
    infra: int
    model_calls: int  # requests recording its episodes sent to the endpoint
    reused_events: int  # events its episodes were served from donor cassettes instead
    reuse_basis: str  # exact | shared sample, when some were
    corrupt: str  # what is wrong with it, when it cannot be read (the rest of the list stands)


class RunDetail(RunRow):
    endpoint: str


class RunsPage(TypedDict):
    runs: list[RunRow]
    total: int
    page: int
    pages: int
    models: list[str]


class RunGridRow(TypedDict):
    task_id: str
    cells: list[EpisodeSummary | None]  # one per seed


class RunPage(TypedDict):
    run: RunDetail
    seeds: list[int | str]
    grid: list[RunGridRow]
    trainings: list[str]  # the trainings that measured this run (a baseline or a candidate)
    replicates: str  # pass@k, pass^k and the seed flip rate over its seeds ("" with one seed)


class VerdictRow(TypedDict):
    id: str
    training_id: str
    epoch: int | None
    accept: bool | None
    criterion: str
    loss: float | None
    reason: str
    new_solves: list[str]
    regressions: list[str]
    baseline_sha: str
    candidate_sha: str | None
    baseline_run: str
    candidate_run: str | None
    created_at: str
    corrupt: str  # "store corrupt: …" when its recomputation failed (then the rest is blank)


class VerdictsPage(TypedDict):
    verdicts: list[VerdictRow]
    movement: str  # the filter: regression | new-solve | "" (all)


class VerdictPage(TypedDict):
    verdict: VerdictRow
    evidence: VerdictEvidence  # its noise, both runs' replicates, each flip attributed or incidental


class UnitDiffPage(TypedDict):
    diff: VerdictDiff
    unit: UnitDiff
    sides: SidesDoc  # both transcripts side by side, aligned at the first difference
    full: bool  # texts shown in full (?full=1), else cut at caps.CAP bytes
    cut: bool  # some text was cut (then the page offers "show all")
    wall_seconds: list[float | None]  # how long a and b took when recorded (None: not timed)


class CompareListRow(TypedDict):
    id: str
    name: str
    models: list[str]
    harnesses: list[str]
    created_at: str
    corrupt: str  # what is wrong with it, when it cannot be read


class ComparesPage(TypedDict):
    compares: list[CompareListRow]


class CompareView(TypedDict):
    id: str
    name: str
    models: list[str]
    rows: list[CompareRow[CompareCell]]
    delta: list[float | None] | None  # last harness − first, per model (two harnesses or more)


class ComparePage(TypedDict):
    compare: CompareView


class EpisodesPage(TypedDict):
    episodes: list[EpisodeListing]
    total: int
    page: int
    pages: int
    facets: EpisodeFacets  # each column's distinct values (the filters' choices)
    filters: EpisodeFilters
    sort: str
    descending: bool
    call_facets: list[str]  # the ``facet`` filter's choices (``cassette/facets.py``)
    unclassified: int  # episodes whose calls the sidecar has not classified yet (``facet`` filter)


class EpisodeView(EpisodeBrief):
    reward: float | None
    passed: int | None
    infra_failure: int | None
    created_at: str
    wall_seconds: (
        float | None
    )  # how long it took when recorded (None: not timed, e.g. recorded before replaykit timed episodes)


class RawEvent(TypedDict):
    position: int
    kind: str
    text: str  # the event's digest form as JSON, capped
    capped: int  # characters hidden


class EpisodePage(TypedDict):
    episode: EpisodeView
    grade: GradeDoc | None
    turns: list[Turn]  # messages and outputs capped (``capped``, ``stdout_capped``: characters hidden)
    raw: list[RawEvent]
    full: bool
    meta: dict[str, str | int | float | bool]  # the episode's scalar meta fields
    lineage: Lineage  # what it was served, its parent and fork point, its forks (each checked)


class HomePage(TrainingsPage, ComparesPage):
    runs: list[RunRow]  # the newest ten
    episode_count: int


class SearchHitRow(SearchHit):
    """A hit as the page shows it: which harness commit ran it and which runs hold it, so
    equal-looking hits differ."""

    harness_sha: str
    kind: str  # the cassette's kind: "episode", or "proposal" (a training's proposer, in no run)
    runs: list[str]  # the runs (of its harness commit) that list this episode, newest first


class SearchPage(TypedDict):
    pending: int  # episodes not indexed yet
    indexed: int  # episodes searchable so far, of
    stored: int  # the episodes the store held when the index last looked
    index_error: str
    q: str
    hits: list[SearchHitRow]
    total: int
    page: int
    pages: int
