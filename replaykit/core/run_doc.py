"""The run document (kind ``measure``) as one pydantic model: ``RunDoc``, what ``Store.get_run``
returns, and its rows (``EpisodeSummary``), its model (``ModelRef``) and panel (``Panel``).
``RunDoc.read`` a stored one, ``to_json`` what the store writes (``core/document.py``). Kept apart
from ``records.py`` (light TypedDicts) so that what never reads a run loads no pydantic."""

from __future__ import annotations

from typing import Annotated, Protocol

from pydantic import ConfigDict, Field

from replaykit.core.document import Document, Real, Stored, WhenSet


class _Identity(Protocol):
    """A model's identity (``cassette.keys.ModelId``: core names no cassette module)."""

    @property
    def name(self) -> str: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def revision(self) -> str: ...


class EpisodeSummary(Stored):
    """One (task, seed) row of a run: what its episode gave, as its cassette's columns hold it
    (checked against them on every read: ``cassette/integrity.py``)."""

    model_config = ConfigDict(frozen=True)

    task_id: str = Field(description="The task, by its folder name.")
    seed: int | str = Field(
        description='The seed: an int in stored runs; audits label resampled instances (e.g. "1~0").'
    )
    cassette_id: str = Field(default="", description="The episode's cassette (the hash of its key).")
    reward: Real | None = Field(default=None, description="The verifier's reward (none: not graded).")
    passed: bool = Field(default=False, description="The verifier passed it.")
    infra_failure: bool = Field(
        default=False, description="An infrastructure failure: never graded, never counted."
    )
    steps: int = Field(default=0, description="Environment steps (actions) taken.")
    llm_calls: int = Field(default=0, description="Model calls made (served from a donor included).")
    tokens: int = Field(default=0, description="Tokens the model calls used, as the endpoint counted them.")
    digest: str = Field(default="", description="The episode's digest (sha256 over its canonical events).")
    reused_events: Annotated[int, WhenSet] = Field(
        default=0, description="Events 0..n-1 served from a donor cassette (prefix reuse, a fork's parent)."
    )
    model_calls: Annotated[int | None, WhenSet] = Field(
        default=None,
        description="Calls that reached the endpoint (stored with reused_events; absent: every one of llm_calls).",
    )

    def _built(self) -> None:
        """A row of a reusing episode holds what it paid, and only then (the rows of runs
        recorded without reuse stay as they were)."""
        self._set(
            "model_calls", self.paid_calls if self.reused_events else None, held=bool(self.reused_events)
        )

    @property
    def unit(self) -> str:
        """A task instance, written ``task#seed``."""
        return f"{self.task_id}#{self.seed}"

    @property
    def paid_calls(self) -> int:
        """The model calls recording this episode sent to the endpoint."""
        return self.llm_calls if self.model_calls is None else self.model_calls


class ModelRef(Stored):
    """A model as documents name it (``keys.ModelId.to_doc()``: what its cassette keys hold)."""

    name: str = Field(description="The model's name, as the endpoint knows it.")
    endpoint: str = Field(
        description="What serves it: builtin, engine:<digest> (a measured engine identity) or a hosted API's URL."
    )
    revision: str = Field(default="", description="A declared revision (empty: none).")

    @classmethod
    def of(cls, model: _Identity) -> ModelRef:
        """A model's identity as documents hold it (what ``ModelId.to_doc`` gives its keys)."""
        return cls(name=model.name, endpoint=model.endpoint, revision=model.revision)


class Panel(Stored):
    """The tasks and seeds a run measured (as the config named them)."""

    tasks: list[str] = Field(default_factory=list, description="The tasks, by folder name.")
    seeds: list[int | str] = Field(
        default_factory=list,
        description="The seeds (ints as measured; a resampled audit's row labels otherwise).",
    )


class RunDoc(Document):
    """A run (kind ``measure``): one harness SHA × one model × a panel, measured; it lists its
    cassettes and one row per (task, seed). What ``Store.get_run`` returns."""

    run_id: str = Field(
        description="The run's id: a hash of its harness SHA, model, panel and config digest."
    )
    kind: str = Field(default="measure", description="The document kind (always measure).")
    name: str = Field(default="", description="The config's name.")
    harness_sha: str = Field(description="The harness commit measured.")
    harness_repo: str = Field(default="", description="Where the harness repo was when it was measured.")
    model: ModelRef = Field(
        description="The model's identity (name, endpoint, revision), as cassette keys name it."
    )
    config_digest: str = Field(description="The digest of what in the config changes an episode's behaviour.")
    panel: Panel = Field(default_factory=Panel, description="The tasks and seeds measured.")
    cassettes: list[str] = Field(description="Its episodes' cassettes, in panel order.")
    episodes: list[EpisodeSummary] = Field(default_factory=list, description="One row per (task, seed).")
    solved: int = Field(default=0, description="Episodes the verifier passed (derived from the rows).")
    total: int = Field(default=0, description="Episodes measured (derived from the rows).")
    reuse_basis: Annotated[str, WhenSet] = Field(
        default="",
        description="Some episode was served a donor's events: exact (a deterministic engine) or shared sample.",
    )
    regraded_from: Annotated[str, WhenSet] = Field(
        default="", description="The run whose episodes this one re-graded (replaykit regrade)."
    )
    trees: Annotated[list[str], WhenSet] = Field(
        default_factory=list,
        description="Its task folders as store trees (core.tree_digest): bundles carry them.",
    )

    def _built(self) -> None:
        """``solved`` and ``total`` are derived from the rows."""
        self._set("solved", sum(1 for e in self.episodes if e.passed))
        self._set("total", len(self.episodes))

    def _read(self) -> None:
        """Stored ``solved``/``total`` must be what the rows give (absent in old runs: derived)."""
        solved, total = sum(1 for e in self.episodes if e.passed), len(self.episodes)
        held = self.model_fields_set
        if ("solved" in held and self.solved != solved) or ("total" in held and self.total != total):
            raise ValueError(
                f"its solved/total ({self.solved}/{self.total}) are not its rows' ({solved}/{total})"
            )
        self._set("solved", solved, held="solved" in held)
        self._set("total", total, held="total" in held)

    @property
    def model_calls(self) -> int:
        """The model calls recording this run's episodes sent to the endpoint."""
        return sum(e.paid_calls for e in self.episodes)

    @property
    def reused_events(self) -> int:
        """The events its episodes were served from donor cassettes instead."""
        return sum(e.reused_events for e in self.episodes)


__all__ = ["EpisodeSummary", "ModelRef", "Panel", "RunDoc"]
