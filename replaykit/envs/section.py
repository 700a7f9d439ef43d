"""The config's ``env`` section: the keys every environment kind shares, and the kind's own
keys validated by the kind's settings model (``EnvKind.settings``) when the section is
validated (``load_config``, or a recorded section read back for a re-execution).

``EnvConfig`` is what a kind's hooks receive (``base.EnvSection``; an ``EnvKind[S]``'s hooks
get it as ``EnvSection[S]``): the shared keys typed, ``settings`` the kind's own model
instance (never a parse), ``limits()`` Harbor's multipliers and overrides, ``table()`` the
section flat, as episodes record it. A key no setting of this kind is one line, naming the
kind that has it when another installed kind does, however the section is validated: only
a stored one read back (context ``core.document.STORED``: ``recorded_env``,
``RunConfig.recorded``) may hold what older versions wrote (an empty ``image_aliases``) or
name a kind not installed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    model_serializer,
    model_validator,
)

from replaykit.core.document import STORED, is_stored
from replaykit.core.errors import ConfigError, EnvError
from replaykit.envs.base import EnvSettings, EnvTable
from replaykit.envs.registry import ENVIRONMENTS, get_env_kind

#: keys every kind shared before kinds had settings of their own: stored configs still hold
#: them empty, so read back (context ``STORED``) an empty one is dropped for a kind that does
#: not declare it; anywhere else it is another kind's key, refused
_LEGACY_ENV_KEYS = ("image_aliases",)
_LIMIT_KEYS = (
    "timeout_multiplier",
    "agent_timeout_multiplier",
    "verifier_timeout_multiplier",
    "build_timeout_multiplier",
    "cpus",
    "memory_mb",
    "storage_mb",
)


class EnvConfig(BaseModel):
    """The keys every environment kind shares; any other key of the ``env`` section belongs
    to the kind and is validated by the kind's own model (``EnvKind.settings``): ``settings``
    holds it typed, and ``model_dump()`` keeps the section flat (as written)."""

    model_config = ConfigDict(extra="allow")

    kind: str = "local"
    timeout_sec: float = Field(default=30.0, gt=0)
    max_output_bytes: int = Field(default=65536, ge=1)
    snapshot: Literal["digest", "full"] = "digest"
    # Harbor's multipliers and resource overrides (envs/limits.py; absent: task.toml's values)
    timeout_multiplier: float | None = Field(
        default=None,
        gt=0,
        description="Scale task.toml's agent, verifier and build timeouts (Harbor's `--timeout-multiplier`).",
    )
    agent_timeout_multiplier: float | None = Field(
        default=None, gt=0, description="Scale the agent timeout (wins over `timeout_multiplier`)."
    )
    verifier_timeout_multiplier: float | None = Field(
        default=None, gt=0, description="Scale the verifier timeout (wins over `timeout_multiplier`)."
    )
    build_timeout_multiplier: float | None = Field(
        default=None, gt=0, description="Scale the image build timeout (wins over `timeout_multiplier`)."
    )
    cpus: float | None = Field(
        default=None, gt=0, description="CPUs of the environment, instead of task.toml's `environment.cpus`."
    )
    memory_mb: int | None = Field(
        default=None,
        ge=16,
        description="Memory (MB), instead of task.toml's `environment.memory_mb` / `memory`.",
    )
    storage_mb: int | None = Field(
        default=None, ge=16, description="Storage (MB), instead of task.toml's `environment.storage_mb`."
    )

    _settings: EnvSettings | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _kind_settings(self, info: ValidationInfo) -> EnvConfig:
        extra = dict(self.model_extra or {})
        stored = is_stored(info.context)
        try:
            model: type[EnvSettings] = get_env_kind(self.kind).settings
        except EnvError as exc:
            if not stored:  # a config file being loaded: its line says which kind
                raise ValueError(f"field 'env.kind': {exc}") from None
            if not extra:  # a stored config's kind fails where it is used (replay never builds one)
                return self
            raise ValueError(f"{exc} (its keys {', '.join(sorted(extra))} cannot be checked)") from None
        for key in _LEGACY_ENV_KEYS if stored else ():
            if key in extra and key not in model.model_fields and not extra[key]:
                del extra[key]
        unknown = sorted(set(extra) - set(model.model_fields))
        if unknown:
            raise ValueError(refused(unknown[0], self.kind, model))
        try:
            settings = model.model_validate(extra)
        except ValidationError as exc:
            raise ValueError(_line(exc)) from None
        self._settings = settings
        self.__pydantic_extra__ = settings.model_dump()
        return self

    def table(self) -> EnvTable:
        """The section as a kind's hooks receive it: flat, the kind's own keys included (the
        limits only when set)."""
        return cast(EnvTable, self.model_dump())

    @model_serializer(mode="wrap")
    def _without_unset_limits(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The limits are dumped only when set: a config without them dumps as it always did."""
        dumped: dict[str, Any] = handler(self)
        return {k: v for k, v in dumped.items() if not (k in _LIMIT_KEYS and v is None)}

    def limits(self) -> dict[str, float]:
        """The multipliers and overrides set (they enter the config digest)."""
        return {k: v for k in _LIMIT_KEYS if (v := getattr(self, k)) is not None}

    @property
    def settings(self) -> EnvSettings:
        """The kind's own settings, typed (its model's defaults where the config is silent)."""
        if self._settings is None:
            self._settings = get_env_kind(self.kind).settings()
        return self._settings


def _line(exc: ValidationError) -> str:
    """A kind's settings error as one line placed under ``env.``."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in ("env", *err["loc"]))
    value = err.get("input")
    shown = (
        ""
        if err["type"] in ("missing", "extra_forbidden") or isinstance(value, dict)
        else f" (got {value!r})"
    )
    return f"field {field!r}: {str(err['msg']).removeprefix('Value error, ')}{shown}"


def owner_of(key: str, besides: str) -> str | None:
    """The installed env kind (other than ``besides``) whose settings have ``key``."""
    for name in ENVIRONMENTS.names():
        if name == besides:
            continue
        try:
            if key in get_env_kind(name).settings.model_fields:
                return name
        except Exception:  # a kind that cannot load here owns nothing we can name
            continue
    return None


def refused(key: str, kind: str, model: type[EnvSettings]) -> str:
    """The line for ``env.<key>`` under ``kind``, which has no such setting."""
    owner = owner_of(key, kind)
    if owner is not None:
        return f"field 'env.{key}' is a setting of env kind {owner!r}, not of {kind!r}; set env.kind: {owner} or remove it"
    own = ", ".join(model.model_fields) or "none"
    return (
        f"field 'env.{key}' is not a setting of env kind {kind!r} "
        f"(its own: {own}; shared: {', '.join(EnvConfig.model_fields)})"
    )


def env_section(kind: str, values: Mapping[str, object] | None = None) -> EnvConfig:
    """An ``env`` section of ``kind`` from command-line values, validated as a config's is
    (one ``ConfigError`` line naming a bad key; an unknown kind is the registry's ``EnvError``)."""
    get_env_kind(kind)
    try:
        return EnvConfig.model_validate({"kind": kind, **dict(values or {})})
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise ConfigError(message) from None


def recorded_env(table: Mapping[str, object]) -> EnvConfig:
    """An episode's recorded ``env`` section, validated again by its kind as stored (context
    ``STORED``: an older format still reads; an ``EnvError`` line when this machine's kind no
    longer takes it)."""
    try:
        return EnvConfig.model_validate(dict(table), context=STORED)
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise EnvError(f"the recorded env section cannot be used here: {message}") from None
