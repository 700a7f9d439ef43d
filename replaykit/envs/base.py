"""The environment protocol: what a harness and a rollout may ask of an environment.

An environment is one episode's sandbox. ``run`` executes a bash action and returns
an :class:`Observation`; ``state_digest`` hashes the sandbox state after a step;
``grade`` runs the task's verifier. Implementations: ``local`` (temporary
directories), ``docker`` (one container per episode). Replay serves the same
protocol from a cassette.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Observation:
    """What one action returned."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Observation":
        return cls(
            stdout=data["stdout"],
            stderr=data["stderr"],
            exit_code=int(data["exit_code"]),
            timed_out=bool(data.get("timed_out", False)),
        )


@dataclass(frozen=True)
class Grade:
    """The verifier's outcome for one episode."""

    reward: float
    passed: bool
    infra_failure: bool = False
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Grade":
        return cls(
            reward=float(data["reward"]),
            passed=bool(data["passed"]),
            infra_failure=bool(data.get("infra_failure", False)),
            detail=str(data.get("detail", "")),
        )


@runtime_checkable
class Environment(Protocol):
    """One episode's sandbox. Use as a context manager: start on enter, close on exit."""

    kind: str

    def start(self) -> None: ...

    def run(self, command: str, timeout_sec: float | None = None) -> Observation: ...

    def state_digest(self) -> str: ...

    def grade(self) -> Grade: ...

    def close(self) -> None: ...

    def metadata(self) -> dict[str, Any]:
        """Facts for the cassette metadata (image digest, pins in force, ...)."""
        ...
