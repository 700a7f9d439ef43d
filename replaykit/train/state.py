"""What a training's documents and proposer sessions read of it: :class:`TrainingState`.

The :class:`~replaykit.train.trainer.Trainer` owns one and keeps it current (its
identity once resolved, its epochs as they are judged); ``documents.py`` and
``proposal.py`` are handed the state, never the Trainer, so nothing below the loop
imports the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from replaykit.cassette.backend import RunStore, StoreBackend
from replaykit.cassette.keys import ModelId
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress
from replaykit.core.training_doc import EpochRecord, TrainingDoc
from replaykit.episodes.config import RunConfig
from replaykit.episodes.harness import HarnessRepo
from replaykit.train.config import TrainConfig
from replaykit.train.estimators import Estimator
from replaykit.train.verdicts import Criterion

if TYPE_CHECKING:
    from replaykit.train.loss import Loss
    from replaykit.train.optimizers import Optimizer


#: the training format made now (``trainer.py``); format 1 trainings replay as they were recorded
FORMAT = 2


class PaidDoc(TypedDict):
    """What a training invocation paid (``train --json``): requests that reached an endpoint."""

    model_calls: int  # every one: the task model's and the proposer's
    task_model_calls: int
    proposer_calls: int
    reused_events: int  # events its episodes were served from donor cassettes instead


@dataclass
class Paid:
    """Counted as the epochs run (never stored: a replay or a resume pays nothing again)."""

    task_model_calls: int = 0
    proposer_calls: int = 0
    reused_events: int = 0

    def to_dict(self) -> PaidDoc:
        return {
            "model_calls": self.task_model_calls + self.proposer_calls,
            "task_model_calls": self.task_model_calls,
            "proposer_calls": self.proposer_calls,
            "reused_events": self.reused_events,
        }


def stored_paid(store: RunStore, doc: TrainingDoc) -> PaidDoc:
    """What recording a stored training's episodes paid, derived from its runs (each verified)
    and its proposals' cassettes: every distinct episode's live model calls and donor events
    once (a run that was an earlier command's, its first baseline, counts: it is the training's)."""
    epochs = doc.epochs or []
    runs = {run_id for e in epochs for run_id in epoch_runs(e) if run_id}
    episodes = {s.cassette_id: s for run_id in sorted(runs) for s in store.get_run(run_id).episodes}
    paid = Paid(
        task_model_calls=sum(s.paid_calls for s in episodes.values()),
        reused_events=sum(s.reused_events for s in episodes.values()),
    )
    smoke = [c for e in epochs for c in e.smoke or [] if c not in episodes]  # a skipped candidate's
    for cassette_id in dict.fromkeys([*(e.proposal_cassette for e in epochs), *smoke]):
        if not cassette_id:
            continue
        reused = store.verified_reuse(cassette_id)
        calls = store.verified_columns(cassette_id)["n_llm"] - reused.calls
        if cassette_id in smoke:
            paid.task_model_calls += calls
        else:
            paid.proposer_calls += calls
        paid.reused_events += reused.events
    return paid.to_dict()


def epoch_runs(e: EpochRecord) -> list[str | None]:
    """Every run an epoch names: its verdict's two and each panel's (``train.panels``)."""
    panels = [r for runs in (e.panels or {}).values() for r in (runs["baseline_run"], runs["candidate_run"])]
    return [e.baseline_run, e.candidate_run, *panels]


@dataclass
class TrainingState:
    """One training's parts, identity and epochs so far (``losses``: judged in this process;
    ``recorded``: the epochs an earlier run stored, when it resumes or replays one)."""

    config: RunConfig
    train_cfg: TrainConfig
    store: StoreBackend
    harness: HarnessRepo
    estimator: Estimator
    criterion: Criterion
    optimizer: Optimizer
    record_mode: RecordMode
    persist: bool
    progress: Progress
    format: int = FORMAT
    spec_digest: str = ""
    training_id: str = ""
    initial_sha: str = ""
    recorded: list[EpochRecord] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)
    paid: Paid = field(default_factory=lambda: Paid())  # what this invocation sent to endpoints
    model: ModelId | None = None  # the task model as its keys name it (``models.endpoint.model_id``)

    def chain(self) -> list[str]:
        """The initial baseline, then every promoted candidate, in order."""
        return [self.initial_sha] + [
            lo.candidate_sha for lo in self.losses if lo.promoted_or_none and lo.candidate_sha
        ]
