"""What an environment hands back: an :class:`Observation` per action, a :class:`Grade` per
episode, and their stored shapes. Plain values, no environment behind them: the cassette format
(events, documents) and every reader of stored episodes use these without loading the
environment protocol (``base.py``, which names them too, for kinds written against it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict


class ObservationDoc(TypedDict):
    """An observation as stored and shown (``Observation.to_dict``)."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: NotRequired[bool]


class GradeDoc(TypedDict):
    """A grade as stored and shown (``Grade.to_dict``)."""

    reward: float
    passed: bool
    infra_failure: NotRequired[bool]
    detail: NotRequired[str]
    timed_out: NotRequired[bool]  # the verifier timed out (written only then: older grades lack it)


@dataclass(frozen=True)
class Observation:
    """What one action returned."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False

    def to_dict(self) -> ObservationDoc:
        return ObservationDoc(
            stdout=self.stdout, stderr=self.stderr, exit_code=self.exit_code, timed_out=self.timed_out
        )

    @classmethod
    def from_dict(cls, data: ObservationDoc) -> "Observation":
        return cls(
            stdout=data["stdout"],
            stderr=data["stderr"],
            exit_code=int(data["exit_code"]),
            timed_out=bool(data.get("timed_out", False)),
        )


@dataclass(frozen=True)
class VerifierOutput:
    """What the verifier wrote beside its grade: its stdout and stderr (capped as every output
    is) and every named reward of its reward file (``{"reward": x}`` for a number). Kept in the
    episode's meta (``verifier``), never in its digest: Harbor's job layout shows it."""

    stdout: str
    stderr: str
    rewards: dict[str, float]


@dataclass(frozen=True)
class Grade:
    """The verifier's outcome for one episode (``output``: what the verifier wrote, when it ran;
    never part of the grade's document or digest)."""

    reward: float
    passed: bool
    infra_failure: bool = False
    detail: str = ""
    #: the verifier itself ran out of time (an infrastructure failure of its own kind: the
    #: outcome ``verify_timeout``), set where the verifier's result is known (``verifier.py``)
    timed_out: bool = False
    output: VerifierOutput | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> GradeDoc:
        doc = GradeDoc(
            reward=self.reward, passed=self.passed, infra_failure=self.infra_failure, detail=self.detail
        )
        if self.timed_out:  # absent otherwise: a grade recorded before it existed digests the same
            doc["timed_out"] = True
        return doc

    @classmethod
    def from_dict(cls, data: GradeDoc) -> "Grade":
        return cls(
            reward=float(data["reward"]),
            passed=bool(data["passed"]),
            infra_failure=bool(data.get("infra_failure", False)),
            detail=str(data.get("detail", "")),
            timed_out=bool(data.get("timed_out", False)),
        )
