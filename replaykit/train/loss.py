"""Loss: one epoch's verdict on (candidate, baseline), with PyTorch's verbs.

``loss.backward()`` persists the verdict and its evidence (both runs' cassettes,
per-task movement) and sets the harness parameter's ``.grad`` to this loss;
``optimizer.step()`` then reads it and promotes or rejects the candidate.
``loss.promoted`` is defined after ``step()``. What ``backward()`` records is the
training's business: the Trainer hands each loss a callback (``on_backward``), so a
loss knows no Trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from replaykit.cassette.backend import DocumentStore
from replaykit.core.determinism import digest_of
from replaykit.core.errors import TrainError
from replaykit.core.records import JSON
from replaykit.core.run_doc import RunDoc
from replaykit.core.training_doc import AdaptiveRecord, EpochRecord, PanelRuns, TestsRecord
from replaykit.train.verdicts import Verdict


def verdict_id_of(
    baseline_run: str | None,
    candidate_run: str | None,
    criterion: str,
    params: dict[str, JSON],
    certificates: list[str] | None = None,
    certified: list[str] | None = None,
) -> str:
    """A verdict's id: its two runs, its criterion with its parameters and, when it excluded
    tasks, the forked certificates it excluded them by (``train/exclusions.py``); when its
    training certified the baseline (``train.certify: every_epoch``), every certificate of it."""
    named: list[object] = [baseline_run, candidate_run, criterion, params]
    if certificates:
        named.append(sorted(certificates))
    if certified is not None:
        named.append({"certified": sorted(certified)})
    return digest_of(named)[:16]


@dataclass
class Loss:
    epoch: int
    baseline_sha: str
    baseline_run: str
    candidate_sha: str | None = None
    candidate_run: str | None = None
    description: str = ""
    verdict: Verdict | None = None
    skipped: str | None = None  # the reason an epoch proposed nothing measurable
    proposal_cassette: str | None = None
    changed: list[str] = field(default_factory=list)
    #: the forked certificates its verdict's exclusions come from (sorted ids)
    certificates: list[str] = field(default_factory=list)
    #: every certificate of the baseline's tasks, when the training certifies every epoch
    certified: list[str] | None = None
    #: each panel's runs (format 2): ``{train: {baseline_run, candidate_run}, val: …, test: …}``
    panels: dict[str, PanelRuns] | None = None
    smoke: list[str] | None = None  # the candidate's smoke episodes (``gates.py``), when it ran them
    candidate_tests: TestsRecord | None = None  # ``train.candidate_tests`` on the candidate, when run
    workspace_digest: str | None = None  # the proposer's workspace (``workspace.py``), when it read one
    adaptive: AdaptiveRecord | None = None  # adaptive seeds' stopping points (``adaptive.py``)
    backward_done: bool = False
    _promoted: bool | None = None
    #: what ``backward()`` calls (the Trainer's: persist the verdict, set ``parameter.grad``)
    on_backward: Callable[[Loss], None] | None = field(default=None, repr=False, compare=False)
    #: where ``runs()`` reads the two runs
    store: DocumentStore | None = field(default=None, repr=False, compare=False)

    @property
    def value(self) -> float:
        return self.verdict.loss if self.verdict else 0.0

    def item(self) -> float:
        return self.value

    @property
    def accept(self) -> bool:
        return bool(self.verdict and self.verdict.accept and not self.skipped)

    @property
    def promoted(self) -> bool:
        if self._promoted is None:
            raise TrainError(f"loss.promoted of epoch {self.epoch} is defined after optimizer.step()")
        return self._promoted

    @promoted.setter
    def promoted(self, value: bool) -> None:
        self._promoted = bool(value)

    @property
    def promoted_or_none(self) -> bool | None:
        """``promoted``, or None before ``optimizer.step()``."""
        return self._promoted

    @property
    def verdict_id(self) -> str | None:
        v = self.verdict
        if v is None:
            return None
        return verdict_id_of(
            self.baseline_run, self.candidate_run, v.criterion, v.params, self.certificates, self.certified
        )

    def runs(self) -> tuple[RunDoc | None, RunDoc | None]:
        """The stored baseline and candidate runs (None where there is none)."""
        store = self.store
        if store is None:
            return None, None
        return (
            store.get_run(self.baseline_run) if self.baseline_run else None,
            store.get_run(self.candidate_run) if self.candidate_run else None,
        )

    def backward(self) -> None:
        """Persist the verdict (evidence included) and set the parameter's ``.grad`` to this loss."""
        if self.on_backward is None:
            raise TrainError(f"loss.backward() of epoch {self.epoch}: this loss belongs to no training")
        self.on_backward(self)
        self.backward_done = True

    @property
    def decision(self) -> str:
        """What its verdict decided: accepted, rejected or skipped."""
        return "skipped" if self.skipped else ("accepted" if self.accept else "rejected")

    def to_record(self) -> EpochRecord:
        """The epoch as the training document holds it (the format-2 fields only when set:
        absent from format 1's records, they stay as recorded)."""
        return EpochRecord(
            epoch=self.epoch,
            baseline_sha=self.baseline_sha,
            baseline_run=self.baseline_run,
            candidate_sha=self.candidate_sha,
            candidate_run=self.candidate_run,
            description=self.description,
            skipped=self.skipped,
            proposal_cassette=self.proposal_cassette,
            changed=self.changed,
            verdict_id=self.verdict_id,
            verdict=self.verdict.to_dict() if self.verdict else None,
            loss=self.value,
            decision=self.decision,
            promoted=self._promoted,
            panels=None
            if self.panels is None
            else {
                name: PanelRuns(baseline_run=r["baseline_run"], candidate_run=r["candidate_run"])
                for name, r in self.panels.items()
            },
            smoke=None if self.smoke is None else list(self.smoke),
            candidate_tests=self.candidate_tests,
            workspace_digest=self.workspace_digest,  # absent: the proposal's key holds no workspace
            adaptive=self.adaptive,
        )
