"""Cassette keys: everything that identifies an episode, hashed into its id.

Same key ⇒ same cassette ⇒ reuse instead of re-running. Wall-clock times, ports
and hosts never enter a key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NotRequired, TypedDict

from replaykit.core.determinism import digest_of
from replaykit.core.records import ModelDoc

KEY_FORMAT = 1


class KeyDoc(TypedDict):
    """A key as stored (``key_json``) and hashed into the cassette id."""

    harness_sha: str
    task_id: str
    task_digest: str
    model: ModelDoc  # as run documents name a model
    seed: int
    config_digest: str
    kind: NotRequired[str]
    extra: NotRequired[list[list[str]]]
    format: NotRequired[int]


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

    def canonical(self) -> KeyDoc:
        return KeyDoc(
            harness_sha=self.harness_sha,
            task_id=self.task_id,
            task_digest=self.task_digest,
            model=ModelDoc(name=self.model.name, endpoint=self.model.endpoint, revision=self.model.revision),
            seed=self.seed,
            config_digest=self.config_digest,
            kind=self.kind,
            extra=[list(pair) for pair in self.extra],
            format=KEY_FORMAT,
        )

    @cached_property
    def id(self) -> str:
        """Computed once per key (a frozen dataclass: the fields never change)."""
        return digest_of(self.canonical())[:24]

    @classmethod
    def from_canonical(cls, data: KeyDoc) -> "CassetteKey":
        return cls(
            harness_sha=data["harness_sha"],
            task_id=data["task_id"],
            task_digest=data["task_digest"],
            model=ModelId(**data["model"]),
            seed=int(data["seed"]),
            config_digest=data["config_digest"],
            kind=data.get("kind", "episode"),
            extra=tuple((p[0], p[1]) for p in data.get("extra", [])),
        )
