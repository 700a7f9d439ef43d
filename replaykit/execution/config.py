"""The ``executor`` section of a config: which executor kind runs the episodes, and its knobs.

``kind`` names an entry of the executor registry (``registry.py``: ``local``, ``ray``,
or an installed package's ``replaykit.executors`` entry point); it is checked when a
config is loaded. The section never enters a cassette key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ExecutorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str = "local"
    workers: int = Field(default=1, ge=1)  # local: processes in the fork pool
    oversubscribe: bool = False  # local: allow more workers than cores (I/O-bound episodes)
    address: str = (
        "auto"  # ray: auto (this node's cluster) | ray://host:10001 | local (a private one) | host:port
    )
    cpus: float = Field(default=1.0, gt=0)  # ray: CPUs each episode declares
    memory_mb: int | None = Field(default=None, gt=0)  # ray: memory each episode declares
    max_retries: int = Field(default=3, ge=0)  # ray: retries of an episode whose worker or node died
    resources: dict[str, float] = Field(default_factory=dict)  # ray: extra custom resources per episode

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        from replaykit.execution.registry import EXECUTORS

        if kind not in EXECUTORS:
            raise ValueError(f"unknown executor kind {kind!r}; known: {', '.join(EXECUTORS.names())}")
        return kind
