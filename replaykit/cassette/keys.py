"""Cassette keys: everything that identifies an episode, hashed into its id.

Same key ⇒ same cassette ⇒ reuse instead of re-running. A key names what an episode ran,
never where (format 2): no wall-clock time, port, local URL, local image ID, absolute path
or current folder enters one. A key keeps the format it was made in (``format``): keys of
format 1 (their model named by the endpoint URL, their docker image by its local ID) still
read, verify and replay; new keys are :data:`KEY_FORMAT`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property
from typing import NotRequired, TypedDict

from replaykit.core.determinism import digest_of

#: 2: a model named by what serves it (``ModelId.endpoint``), a docker task image by its recipe
KEY_FORMAT = 2


class KeyDoc(TypedDict):
    """A key as stored (``key_json``) and hashed into the cassette id."""

    harness_sha: str
    task_id: str
    task_digest: str
    model: dict[str, str]  # ModelId.to_doc(): as documents name a model (core/run_doc.ModelRef)
    seed: int
    config_digest: str
    kind: NotRequired[str]
    extra: NotRequired[list[list[str]]]
    format: NotRequired[int]


@dataclass(frozen=True)
class ModelId:
    """A model's identity: its name, what serves it, a declared revision.

    ``endpoint`` (format 2) names what serves the model, never where it listens: ``builtin``
    (the reference server), ``engine:<digest>`` (a self-hosted engine, by the identity measured
    from it: weights, chat template, engine build, context; ``models/identity.py``), or a
    hosted API's URL without its port (``https://api.openai.com/v1``). In format 1 it was the
    config's ``base_url``, port included."""

    name: str
    endpoint: str
    revision: str = ""

    def label(self) -> str:
        return f"{self.name}@{self.endpoint}" + (f"#{self.revision}" if self.revision else "")

    def to_doc(self) -> dict[str, str]:
        """The model as a key holds it (``name``, ``endpoint``, ``revision``); a document holds
        the same shape as ``core/run_doc.ModelRef`` (``ModelRef.of``)."""
        return {"name": self.name, "endpoint": self.endpoint, "revision": self.revision}


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
    format: int = KEY_FORMAT  # the key format it was made in (an imported key keeps its own)

    def canonical(self) -> KeyDoc:
        return KeyDoc(
            harness_sha=self.harness_sha,
            task_id=self.task_id,
            task_digest=self.task_digest,
            model=self.model.to_doc(),
            seed=self.seed,
            config_digest=self.config_digest,
            kind=self.kind,
            extra=[list(pair) for pair in self.extra],
            format=self.format,
        )

    @cached_property
    def id(self) -> str:
        """Computed once per key (a frozen dataclass: the fields never change)."""
        return digest_of(self.canonical())[:24]

    def in_format(self, version: int) -> "CassetteKey":
        """The same fields as a key of format ``version`` (a key whose fields hold nothing
        machine-local, e.g. a pytest or proxy key, names the same episode in either format)."""
        return dataclasses.replace(self, format=version)

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
            format=int(data.get("format", 1)),
        )
