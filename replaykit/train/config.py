"""The ``train:`` section of a run config (epochs, seed, patch surface, estimator,
criterion, optimizer, certify, held-out panels, the smoke gate and candidate tests, the
circuit breaker, what the proposer may read), validated as :class:`TrainConfig` by
``load_config`` itself (a task in two panels is the trainer's first check: ``panels.py``).

Each of ``estimator``, ``criterion`` and ``optimizer`` names a registered factory
(``kind`` / ``name``); its other keys are the factory's parameters, validated strictly
against its signature (``FactoryRegistry.validate``) whenever the section is validated.
When the config is read from a file (``load_config`` passes the file's folder as the
validation context) the three are also built once, so a value their constructors refuse
(``margin: -1``) or a diff file that is not there is a line of the config, not a failure
halfway through a training.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from replaykit.core.errors import ConfigError
from replaykit.core.registry import FactoryRegistry
from replaykit.models.config import Seed

#: what a config that does not name them trains with (docs/training.md says so too)
DEFAULT_ESTIMATOR: dict[str, object] = {
    "kind": "agentic",
    "backend": {"kind": "openai", "model": "reference-proposer", "base_url": "builtin"},
}
DEFAULT_CRITERION: dict[str, object] = {"name": "strict_pareto"}
DEFAULT_OPTIMIZER: dict[str, object] = {"name": "greedy_monotonic"}


#: what of the harness repository and the training panel the proposer reads (``workspace.py``)
DEFAULT_VISIBLE = ("harness/*", "tasks/*/instruction.md")
#: the two roots of the proposer's view: the harness's files, and each training-panel task's
VISIBLE_ROOTS = ("harness/", "tasks/")


def _copy(spec: Mapping[str, object]) -> Callable[[], dict[str, object]]:
    return lambda: {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in spec.items()}


class PanelsConfig(BaseModel):
    """``train.panels``: held-out panels beside the training panel (``panel``)."""

    model_config = ConfigDict(extra="forbid")
    val: list[str] | None = Field(
        default=None,
        description="Paths or globs of the validation tasks (as panel.tasks; the same seeds): the criterion "
        "decides on them, the proposer never sees them.",
    )
    test: list[str] | None = Field(
        default=None,
        description="Paths or globs of the test tasks: measured for every baseline and accepted candidate, "
        "never shown to the proposer, never deciding.",
    )

    @field_validator("val", "test")
    @classmethod
    def _not_empty(cls, tasks: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if tasks is not None and not tasks:
            raise ValueError(
                f"field 'train.panels.{info.field_name}': empty; list at least one task path or glob, "
                f"or leave {info.field_name} out"
            )
        return tasks


class SmokeConfig(BaseModel):
    """``train.smoke``: the candidate's run on the training panel's first tasks × seeds first."""

    model_config = ConfigDict(extra="forbid")
    tasks: int = Field(
        default=1,
        ge=0,
        description="How many of the training panel's tasks (its first, by id); 0: no smoke run.",
    )
    seeds: int = Field(default=1, ge=1, description="How many of the panel's seeds (its first).")


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    epochs: int = Field(default=5, ge=1)
    seed: Seed = 0
    patch_surface: list[str] = Field(default_factory=lambda: ["harness.py"], min_length=1)
    estimator: dict[str, object] = Field(default_factory=_copy(DEFAULT_ESTIMATOR))
    criterion: dict[str, object] = Field(default_factory=_copy(DEFAULT_CRITERION))
    optimizer: dict[str, object] = Field(default_factory=_copy(DEFAULT_OPTIMIZER))
    #: ``every_epoch``: the baseline's episodes re-executed each epoch (``certification.py``)
    certify: Literal["never", "every_epoch"] = "never"
    #: one α spent across the epochs by a criterion that tests at a level (``error_budget.py``)
    error_budget: float | None = None

    @field_validator("error_budget")
    @classmethod
    def _budget(cls, value: float | None) -> float | None:
        if value is not None and not 0 < value < 1:
            raise ValueError(f"error_budget {value}: give one alpha strictly between 0 and 1, e.g. 0.05")
        return value

    panels: PanelsConfig = Field(
        default_factory=PanelsConfig,
        description="Held-out panels beside the training panel (panel): val decides, test is only measured; "
        "a task belongs to one panel.",
    )
    smoke: SmokeConfig = Field(
        default_factory=SmokeConfig,
        description="The smoke run a candidate makes before its panel: an episode whose harness raises skips "
        "the epoch.",
    )
    candidate_tests: str | None = Field(
        default=None,
        description="A shell command (the harness repository's own tests) run in a clean checkout of each "
        "candidate before its panel; a non-zero exit skips the epoch.",
    )
    max_consecutive_skips: int = Field(
        default=2,
        ge=1,
        description="The circuit breaker: after this many skipped epochs in a row the training stops (a rerun "
        "with a higher limit resumes it).",
    )
    proposer_visible: list[str] = Field(
        default_factory=lambda: list(DEFAULT_VISIBLE),
        description="Globs of what the proposer's workspace copies besides the training panel's transcripts, "
        "prior candidates and scores: harness/<glob> (the baseline's files) and tasks/<task>/<glob> "
        "(training-panel tasks' files); a task's tests/ and solution/ never.",
    )

    @field_validator("proposer_visible")
    @classmethod
    def _inside(cls, globs: list[str]) -> list[str]:
        for i, glob in enumerate(globs):
            parts = glob.replace("\\", "/").split("/")
            if glob.startswith(("/", "~")) or ".." in parts or not glob.startswith(VISIBLE_ROOTS):
                raise ValueError(
                    f"field 'train.proposer_visible.{i}': {glob!r} names a path outside the harness repository "
                    "and the training panel; write harness/<glob> (the harness's files) or "
                    "tasks/<task>/<glob> (a training-panel task's files)"
                )
        return globs

    @field_validator("estimator")
    @classmethod
    def _estimator(cls, spec: dict[str, object]) -> dict[str, object]:
        from replaykit.train.estimators import ESTIMATORS

        return _validated(ESTIMATORS, "estimator", "kind", "agentic", spec)

    @field_validator("criterion")
    @classmethod
    def _criterion(cls, spec: dict[str, object]) -> dict[str, object]:
        from replaykit.train.criteria import CRITERIA

        return _validated(CRITERIA, "criterion", "name", "strict_pareto", spec)

    @field_validator("optimizer")
    @classmethod
    def _optimizer(cls, spec: dict[str, object]) -> dict[str, object]:
        from replaykit.train.optimizers import OPTIMIZERS

        return _validated(OPTIMIZERS, "optimizer", "name", "greedy_monotonic", spec)

    @model_validator(mode="after")
    def _budget_spender(self) -> TrainConfig:
        """An error budget is spent by a criterion that tests at a level (``paired_test``)."""
        if self.error_budget is None:
            return self
        from replaykit.train.criteria import CRITERIA
        from replaykit.train.error_budget import Levelled

        name = str(self.criterion.get("name", "strict_pareto"))
        factory = CRITERIA.factory(name)
        if not (isinstance(factory, type) and issubclass(factory, Levelled)):
            raise ValueError(
                f"train.error_budget is spent by a criterion that tests at a level; {name} does not: "
                "use train.criterion: {name: paired_test}"
            )
        return self

    @model_validator(mode="after")
    def _built(self, info: ValidationInfo) -> TrainConfig:
        """Read from a file (``context["base_dir"]``): build each once, as the trainer will."""
        base_dir = (info.context or {}).get("base_dir")
        if base_dir is None:
            return self
        from replaykit.train.criteria import make_criterion
        from replaykit.train.estimators import make_estimator
        from replaykit.train.optimizers import make_optimizer

        crit = _name_and_params(self.criterion, "name", "strict_pareto")
        opt = _name_and_params(self.optimizer, "name", "greedy_monotonic")
        builds: tuple[tuple[str, Callable[[], object]], ...] = (
            ("estimator", lambda: make_estimator(self.estimator, base_dir=Path(base_dir))),
            ("criterion", lambda: make_criterion(crit[0], **crit[1])),
            ("optimizer", lambda: make_optimizer(opt[0], **opt[1])),
        )
        for field, build in builds:
            try:
                build()
            except ConfigError as exc:
                raise ValueError(f"field 'train.{field}': {exc}") from None
        return self


def _name_and_params(spec: Mapping[str, object], key: str, default: str) -> tuple[str, dict[str, object]]:
    params = dict(spec)
    return str(params.pop(key, default)), params


def _validated(
    registry: FactoryRegistry[Any], field: str, key: str, default: str, spec: dict[str, object]
) -> dict[str, object]:
    """``spec`` with its parameters validated against the factory it names (one line, placed
    at the parameter when the error names one)."""
    name, params = _name_and_params(spec, key, default)
    try:
        return {key: name, **registry.validate(name, params)}
    except ConfigError as exc:
        message = str(exc)
        bad = next((p for p in params if f"parameter {p!r}" in message), None)
        where = f"train.{field}.{bad}" if bad else f"train.{field}.{key}" if key in spec else f"train.{field}"
        raise ValueError(f"field '{where}': {message}") from None


M = TypeVar("M", bound=BaseModel)


class Sectioned(Protocol):
    """A run config (``episodes.config.RunConfig``), as far as its sections go."""

    def section(self, name: str, model: type[M]) -> M: ...


def train_config(config: Sectioned) -> TrainConfig:
    """The config's ``train:`` section, typed (validated when the config was)."""
    return config.section("train", TrainConfig)
