"""Cassette keys: everything that identifies an episode, hashed into its id.

Same key ⇒ same cassette ⇒ reuse instead of re-running. Wall-clock times, ports
and hosts never enter a key.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from replaykit.core.determinism import digest_of

KEY_FORMAT = 1


@dataclass(frozen=True)
class ModelId:
    """A model's identity: its name, the endpoint it was served from, a declared revision."""

    name: str
    endpoint: str
    revision: str = ""

    def label(self) -> str:
        return f"{self.name}@{self.endpoint}" + (f"#{self.revision}" if self.revision else "")


@dataclass(frozen=True)
class CassetteKey:
    """The canonical key of one episode (or one proposer call sequence)."""

    harness_sha: str
    task_id: str
    task_digest: str
    model: ModelId
    seed: int
    config_digest: str
    kind: str = "episode"
    extra: tuple[tuple[str, str], ...] = field(default=())

    def canonical(self) -> dict[str, Any]:
        data = asdict(self)
        data["extra"] = [list(pair) for pair in self.extra]
        data["format"] = KEY_FORMAT
        return data

    @cached_property
    def id(self) -> str:
        """Computed once per key (a frozen dataclass: the fields never change)."""
        return digest_of(self.canonical())[:24]

    @classmethod
    def from_canonical(cls, data: dict[str, Any]) -> "CassetteKey":
        return cls(
            harness_sha=data["harness_sha"],
            task_id=data["task_id"],
            task_digest=data["task_digest"],
            model=ModelId(**data["model"]),
            seed=int(data["seed"]),
            config_digest=data["config_digest"],
            kind=data.get("kind", "episode"),
            extra=tuple(tuple(p) for p in data.get("extra", [])),
        )
