"""What every criterion shares: a run's outcomes by unit, the :class:`Verdict` a criterion gives,
the :class:`Criterion` protocol, and the pairing of two runs' units (``criteria.py`` holds the
built-in criteria and their registry; ``paired_test.py`` the calibrated one).

A *unit* is one task instance: a (task, seed) pair, written ``task#seed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from replaykit.core.records import JSON
from replaykit.core.run_doc import RunDoc
from replaykit.core.verdict_doc import VerdictRecord


@dataclass(frozen=True)
class Outcome:
    unit: str
    task_id: str
    passed: bool
    infra: bool
    reward: float
    steps: int
    tokens: int


def outcomes(run: RunDoc) -> dict[str, Outcome]:
    """A run's episodes by unit (``task#seed``)."""
    out = {}
    for e in run.episodes:
        out[e.unit] = Outcome(
            e.unit, e.task_id, e.passed, e.infra_failure, e.reward or 0.0, e.steps, e.tokens
        )
    return out


@dataclass
class Verdict:
    criterion: str
    params: dict[str, JSON]
    accept: bool
    loss: float
    reason: str
    regressions: list[str] = field(default_factory=list)
    new_solves: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, JSON] = field(default_factory=dict)

    def to_dict(self) -> VerdictRecord:
        return VerdictRecord(
            criterion=self.criterion,
            params=self.params,
            accept=self.accept,
            loss=self.loss,
            reason=self.reason,
            regressions=self.regressions,
            new_solves=self.new_solves,
            excluded=self.excluded,
            metrics=self.metrics,
        )


class Criterion(Protocol):
    name: str

    def params(self) -> dict[str, JSON]: ...

    def __call__(
        self, candidate: RunDoc, baseline: RunDoc, exclude: dict[str, str] | None = None
    ) -> Verdict: ...


def pair_runs(
    candidate: RunDoc, baseline: RunDoc, exclude: dict[str, str] | None
) -> tuple[dict[str, Outcome], dict[str, Outcome], list[str], dict[str, str]]:
    b, c = outcomes(baseline), outcomes(candidate)
    excluded = dict(exclude or {})
    units = sorted(u for u in set(b) & set(c) if b[u].task_id not in excluded)
    return b, c, units, excluded


def with_exclusions(reason: str, excluded: dict[str, str]) -> str:
    if not excluded:
        return reason
    return f"{reason}; excluded (not counted): " + ", ".join(
        f"{t} ({why})" for t, why in sorted(excluded.items())
    )


def movement(b: dict[str, Outcome], c: dict[str, Outcome], units: list[str]) -> tuple[list[str], list[str]]:
    regressions = [u for u in units if b[u].passed and not c[u].passed]
    new = [u for u in units if c[u].passed and not b[u].passed]
    return regressions, new
