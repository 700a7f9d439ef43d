"""YAML run configs, validated with pydantic.

Relative paths in a config resolve against the folder holding the config file, and
what a config does not name stays inside that folder (the store, the harness repo made
from its template). ``load_config`` validates a config whole before anything is created:
every section (``train:`` included: its model lives with the layer that reads it,
``replaykit.train.config``, named here by reference), every factory it names with its
parameters, and every path it references (each panel pattern matches a task folder, the
harness repo exists or has a template). A bad config is one clear ``ConfigError`` line
naming the file, the line and the field (worded by ``config_errors.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from replaykit.cassette.stores import is_url, split_location
from replaykit.core.determinism import digest_of
from replaykit.core.document import STORED
from replaykit.core.errors import ConfigError
from replaykit.core.registry import load_ref
from replaykit.envs.section import EnvConfig
from replaykit.episodes.config_errors import config_error, located_line, override_error, validation_line
from replaykit.episodes.config_paths import Referenced, check_paths
from replaykit.episodes.config_yaml import Lines, read_yaml
from replaykit.episodes.limits import LimitsConfig
from replaykit.execution.config import ExecutorConfig
from replaykit.models.config import ModelConfig, Seed


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HarnessConfig(_Strict):
    repo: str = ".replaykit/harnesses/quickstart"  # beside the config unless it names a place
    template: str | None = "quickstart"
    branch: str = "main"
    entry: str = "harness.py"
    #: free-form values for the harness (Any: pydantic cannot take the recursive ``JSON`` alias)
    params: dict[str, Any] = Field(default_factory=dict)
    #: a named agent (``replaykit/agents/``): its harness template is the repo (made at
    #: ``.replaykit/agents/NAME-<template digest>`` beside the config), ``repo``/``template``/``entry`` are its own
    agent: str | None = None

    @field_validator("agent")
    @classmethod
    def _known_agent(cls, name: str | None) -> str | None:
        if name is not None:
            from replaykit.agents.registry import get_agent

            try:
                get_agent(name)
            except ConfigError as exc:  # names the value and the registered ones: placed as is
                raise ValueError(f"field 'harness.agent': {exc}") from None
        return name

    @model_validator(mode="after")
    def _agent_repo(self) -> HarnessConfig:
        """A named agent's harness is its own template's repo, beside the config."""
        if self.agent is not None:
            from replaykit.agents.registry import get_agent

            self.repo = f".replaykit/agents/{get_agent(self.agent).repo_name()}"
            self.template = None
            self.entry = get_agent(self.agent).entry
        return self

    def template_source(self) -> str | Path | None:
        """What the repo is made from when it does not exist: a named agent's template folder,
        else ``template`` (a folder of ``replaykit/templates/``)."""
        if self.agent is not None:
            from replaykit.agents.registry import get_agent

            return get_agent(self.agent).template
        return self.template

    @field_validator("params")
    @classmethod
    def _known_params(cls, params: dict[str, object]) -> dict[str, object]:
        """``max_steps``, the one parameter every shipped harness reads, must be a count."""
        steps = params.get("max_steps")
        if "max_steps" in params and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            raise ValueError(
                f"field 'harness.params.max_steps': expected a whole number >= 1 (got {steps!r})"
            )
        return params


#: the most seeds an adaptive panel measures a task instance on (``panel.seeds.adaptive.max``)
MAX_ADAPTIVE_SEEDS = 64


class AdaptiveRange(_Strict):
    """``panel.seeds: {adaptive: {min, max}}``: seeds ``start``, ``start+1``, … in order; every
    task is measured on the first ``min``, a training measures more only where its decision is
    open (``replaykit/train/adaptive.py``), never beyond ``max``."""

    min: int = Field(ge=1)
    max: int = Field(ge=1)
    start: Seed = 0


class AdaptiveSeeds(_Strict):
    adaptive: AdaptiveRange


_SEED_LIST: TypeAdapter[list[int]] = TypeAdapter(Annotated[list[Seed], Field(min_length=1)])


def _adaptive(value: object) -> object:
    """``panel.seeds`` as a list of seeds or, given a mapping, :class:`AdaptiveSeeds`; its errors
    one line each, placed at the field they are about (never the union's members)."""
    if not isinstance(value, Mapping):
        try:
            return _SEED_LIST.validate_python(value)
        except ValidationError as exc:
            raise ValueError(validation_line(exc, prefix="panel.seeds.")) from None
    try:
        found = AdaptiveSeeds.model_validate(value)
    except ValidationError as exc:
        raise ValueError(validation_line(exc, prefix="panel.seeds.", model=AdaptiveSeeds)) from None
    a = found.adaptive
    if a.min > a.max:
        raise ValueError(
            f"field 'panel.seeds.adaptive': min {a.min} is above max {a.max}; give min <= max, "
            "e.g. {adaptive: {min: 2, max: 8}}"
        )
    if a.max > MAX_ADAPTIVE_SEEDS:
        raise ValueError(
            f"field 'panel.seeds.adaptive.max': {a.max} is over {MAX_ADAPTIVE_SEEDS}, the most seeds an "
            f"adaptive panel measures a task on; give {MAX_ADAPTIVE_SEEDS} or fewer"
        )
    return found


class PanelConfig(_Strict):
    tasks: list[str] = Field(min_length=1)  # paths or globs of task folders: no default
    #: a list, or ``{adaptive: {min, max}}`` (a training measures more seeds where its decision is open)
    seeds: list[Seed] | AdaptiveSeeds = Field(default_factory=lambda: [0, 1])

    @field_validator("seeds", mode="before")
    @classmethod
    def _adaptive_seeds(cls, seeds: object) -> object:
        return _adaptive(seeds)

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int] | AdaptiveSeeds) -> list[int] | AdaptiveSeeds:
        if isinstance(seeds, AdaptiveSeeds):
            return seeds
        twice = next((s for i, s in enumerate(seeds) if s in seeds[:i]), None)
        if twice is not None:
            raise ValueError(
                f"seed {twice} is listed twice (it would measure the same episode twice); list each seed once"
            )
        return seeds

    @property
    def adaptive(self) -> AdaptiveRange | None:
        """The adaptive range, when ``seeds`` is one."""
        return self.seeds.adaptive if isinstance(self.seeds, AdaptiveSeeds) else None

    @property
    def seed_list(self) -> list[int]:
        """The seeds every task is measured on: the list, or an adaptive range's first ``min``."""
        a = self.adaptive
        return list(range(a.start, a.start + a.min)) if a is not None else list(cast(list[int], self.seeds))


class RecordConfig(_Strict):
    secrets: list[str] = Field(default_factory=list)  # env var names whose values never reach a cassette
    rules: list[str] = Field(default_factory=list)  # normalisation rules (replaykit.capture.matchers)

    @field_validator("rules")
    @classmethod
    def _known_rules(cls, rules: list[str]) -> list[str]:
        from replaykit.capture.matchers import known_rules

        unknown = [r for r in rules if r not in known_rules()]
        if unknown:
            raise ValueError(f"unknown normalisation rule {unknown[0]!r}; known: {', '.join(known_rules())}")
        return rules


M = TypeVar("M", bound=BaseModel)

#: the model of each section validated by a layer above this one (``module:attribute``)
SECTIONS: dict[str, str] = {"train": "replaykit.train.config:TrainConfig"}


class RunConfig(_Strict):
    name: str = "run"
    store: str = "cassettes"  # beside the config unless it names a place
    harness: HarnessConfig = Field(default_factory=HarnessConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    panel: PanelConfig
    env: EnvConfig = Field(default_factory=EnvConfig)
    record: RecordConfig = Field(default_factory=RecordConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)  # enforced by the framework (limits.py)
    #: kept as written (documents store it so); validated as ``SECTIONS["train"]``, typed: ``section``
    train: dict[str, object] | None = None

    #: the folder relative paths resolve against (set by load_config)
    base_dir: Path = Field(default=Path("."), exclude=True)
    #: the file it was read from and the line of each key (set by load_config; for error lines)
    _source: Path | None = PrivateAttr(default=None)
    _lines: Lines = PrivateAttr(default_factory=dict)
    _sections: dict[str, BaseModel] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _validate_sections(self, info: ValidationInfo) -> RunConfig:
        for name, ref in SECTIONS.items():
            data = getattr(self, name)
            if data is None:
                continue
            model = cast(type[BaseModel], load_ref(ref))
            try:
                self._sections[name] = model.model_validate(data, context=info.context)
            except ValidationError as exc:
                raise ValueError(validation_line(exc, prefix=f"{name}.", model=model)) from None
        return self

    @model_validator(mode="after")
    def _agent_rules(self) -> RunConfig:
        """A named agent's normalisation rules (``NamedAgent.rules``) join ``record.rules``."""
        if self.harness.agent is not None:
            from replaykit.agents.registry import get_agent

            wanted = get_agent(self.harness.agent).rules
            self.record.rules += [r for r in wanted if r not in self.record.rules]
        return self

    def section(self, name: str, model: type[M]) -> M:
        """The section ``name`` as ``model`` (its defaults when the config has none)."""
        found = self._sections.get(name)
        if not isinstance(found, model):
            found = self._sections[name] = model.model_validate(getattr(self, name) or {})
        return found

    @classmethod
    def recorded(cls, data: Mapping[str, object], what: str) -> RunConfig:
        """A config a stored document holds, read as stored (context ``STORED``: the sections
        of an older format still load); one line when it no longer validates here (a plugin it
        names is not installed, say)."""
        try:
            return cls.model_validate(data, context=STORED)
        except ValidationError as exc:
            raise ConfigError(f"the config recorded with {what}: {validation_line(exc, model=cls)}") from None

    def field_error(self, loc: tuple[str | int, ...], message: str) -> ConfigError:
        """``message`` about the field at ``loc``, as one line naming this config's file and line."""
        field = ".".join(str(p) for p in loc)
        return config_error(self._source, self._lines, loc, f"field {field!r}: {message}")

    def config_error(self, exc: ValidationError, prefix: str = "") -> ConfigError:
        """A section validated later (``train:``) as one line naming this config's file and line."""
        loc, line = located_line(exc, prefix)
        return config_error(self._source, self._lines, loc, line)

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    @property
    def store_path(self) -> Path:
        return self.path(self.store)

    @property
    def store_location(self) -> str:
        """What ``open_store`` opens: a backend URL as written, else the resolved folder."""
        if is_url(self.store):
            return self.store
        scheme_free = split_location(self.store)[1]
        return str(self.path(scheme_free))

    @property
    def repo_path(self) -> Path:
        return self.path(self.harness.repo)

    def digest(self) -> str:
        """What, besides the key's other parts, changes an episode's behaviour."""
        parts: dict[str, object] = {
            "entry": self.harness.entry,
            "params": self.harness.params,
            "temperature": self.model.temperature,
            "env": {
                "timeout_sec": self.env.timeout_sec,
                "max_output_bytes": self.env.max_output_bytes,
                "snapshot": self.env.snapshot,
            },
            "rules": self.record.rules,
        }
        if self.model.params.sent():  # absent when unset: keys recorded before model.params stay
            parts["model_params"] = self.model.params.sent()
        if self.env.limits():  # the same: absent unless a multiplier or an override is set
            parts["limits"] = self.env.limits()
        if self.limits.digest_part():  # the framework's episode limits: absent when unset, likewise
            parts["episode_limits"] = self.limits.digest_part()
        return digest_of(parts)[:16]


def apply_overrides(data: dict[str, object], overrides: Mapping[str, object] | None) -> dict[str, object]:
    """Set dotted keys in a config mapping, in place: ``{"env.snapshot": "full"}``."""
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"cannot set {dotted}: {part!r} is not a mapping in the config")
            node = child
        node[last] = value
    return data


def load_config(
    path: str | Path, overrides: Mapping[str, object] | None = None, flags: Mapping[str, str] | None = None
) -> RunConfig:
    """The config in ``path`` (``overrides``: dotted keys set on top, e.g. from the command line),
    validated whole (the module docstring); any error is one line naming the file, the line
    and the key, or, for a key an override set, the override (``flags``: the command-line flag
    that set each key, named instead of it). Nothing is created."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"config file {path} does not exist; pass a YAML file such as configs/quickstart.yaml"
        )
    data, lines = read_yaml(path)
    if data is None and not overrides:
        raise ConfigError(
            f"config file {path} is empty; a config names at least its panel (panel.tasks): "
            "start from configs/quickstart.yaml, or `replaykit init DIR` writes one"
        )
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    apply_overrides(data, overrides)
    for dotted in overrides or {}:  # set on the command line: no line of the file to name
        parts = tuple(dotted.split("."))
        lines = {loc: n for loc, n in lines.items() if loc[: len(parts)] != parts}
        lines[parts] = 0  # nor the line of its enclosing section (``line_of`` stops here)
    base_dir = path.resolve().parent
    try:
        config = RunConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        loc, line = located_line(exc, model=RunConfig)
        raise override_error(overrides, flags, loc, line) or config_error(path, lines, loc, line) from None
    config.base_dir = base_dir
    config._source, config._lines = path, lines
    store = None if is_url(config.store) else config.path(split_location(config.store)[1])
    refs = Referenced(config.panel.tasks, base_dir, config.repo_path, config.harness.template_source(), store)
    check_paths(refs, config.field_error)
    return config
