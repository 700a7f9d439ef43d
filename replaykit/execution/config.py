"""The ``executor`` section of a config: which executor kind runs the episodes, and its keys.

``kind`` names an entry of the executor registry (``registry.py``: ``local``, ``ray``, or an
installed package's ``replaykit.executors`` entry point); every other key belongs to the
kind and is validated by its own model (``ExecutorKind.settings``) when the section is
validated: ``settings`` holds it typed, ``model_dump()`` keeps the section flat. A key of
another kind is one line naming the kind that has it, however the section is validated;
only a stored config being read back (validation context ``core.document.STORED``:
``RunConfig.recorded``) keeps the keys of the one flat section of old. The section never
enters a cassette key. ``parse_executor`` reads the CLI's ``--executor KIND[:k=v,…]`` into
the same section.
"""

from __future__ import annotations

import yaml
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, ValidationInfo, model_validator

from replaykit.core.document import is_stored
from replaykit.core.errors import ConfigError
from replaykit.execution.registry import EXECUTORS
from replaykit.execution.settings import ExecutorSettings

#: every key of the one ``executor`` section all kinds shared before each had its own model:
#: a stored config (a training's) still holds them; read back (context ``STORED``) they are
#: kept as they were and ignored; anywhere else each is refused under a kind that lacks it
_LEGACY_KEYS = ("workers", "oversubscribe", "address", "cpus", "memory_mb", "max_retries", "resources")


def _line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in ("executor", *err["loc"]))
    value = err.get("input")
    shown = (
        ""
        if err["type"] in ("missing", "extra_forbidden") or isinstance(value, dict)
        else f" (got {value!r})"
    )
    return f"field {field!r}: {str(err['msg']).removeprefix('Value error, ')}{shown}"


def _owner(key: str, besides: str) -> str | None:
    """The installed executor kind (other than ``besides``) whose settings have ``key``."""
    for name in EXECUTORS.names():
        if name == besides:
            continue
        try:
            if key in EXECUTORS.get(name).settings.model_fields:
                return name
        except Exception:  # a kind that cannot load here owns nothing we can name
            continue
    return None


class ExecutorConfig(BaseModel):
    model_config = ConfigDict(extra="allow")

    kind: str = "local"

    _settings: ExecutorSettings | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _kind_settings(self, info: ValidationInfo) -> ExecutorConfig:
        if self.kind not in EXECUTORS:
            raise ValueError(
                f"field 'executor.kind': unknown executor kind {self.kind!r}; known: {', '.join(EXECUTORS.names())}"
            )
        model: type[ExecutorSettings] = EXECUTORS.get(self.kind).settings
        extra = dict(self.model_extra or {})
        kept: dict[str, object] = {}  # a stored config's keys of the one flat section of old
        if is_stored(info.context):
            kept = {k: extra.pop(k) for k in _LEGACY_KEYS if k in extra and k not in model.model_fields}
        unknown = sorted(set(extra) - set(model.model_fields))
        if unknown:
            key, owner = unknown[0], _owner(unknown[0], self.kind)
            if owner is not None:
                raise ValueError(
                    f"field 'executor.{key}' is a setting of executor kind {owner!r}, not of {self.kind!r}; "
                    f"set executor.kind: {owner} or remove it"
                )
            own = ", ".join(model.model_fields) or "none"
            raise ValueError(
                f"field 'executor.{key}' is not a setting of executor kind {self.kind!r} (its own: {own})"
            )
        try:
            self._settings = model.model_validate(extra)
        except ValidationError as exc:
            raise ValueError(_line(exc)) from None
        self.__pydantic_extra__ = {**kept, **self._settings.model_dump()}  # a stored section dumps as it was
        return self

    @property
    def settings(self) -> ExecutorSettings:
        """The kind's own settings, typed (its model's defaults where the config is silent)."""
        if self._settings is None:
            self._settings = EXECUTORS.get(self.kind).settings()
        return self._settings


def _items(text: str) -> list[str]:
    """``k=v,k=v`` split on the commas outside brackets and braces (``resources={a: 1, b: 2}``)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def executor_values(text: str) -> dict[str, object]:
    """``--executor KIND[:k=v,…]`` as the ``executor`` section it stands for (values as YAML
    reads them: ``workers=4`` is a number, ``oversubscribe=true`` a boolean)."""
    kind, _, rest = text.partition(":")
    if not kind.strip():
        raise ConfigError(f"--executor {text!r}: name a kind first, e.g. --executor local:workers=4")
    values: dict[str, object] = {"kind": kind.strip()}
    for item in _items(rest):
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--executor {text!r}: {item!r} is not KEY=VALUE, e.g. --executor ray:address=auto,cpus=2"
            )
        try:
            values[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            values[key.strip()] = raw
    return values


def parse_executor(text: str) -> ExecutorConfig:
    """``--executor KIND[:k=v,…]`` validated as a config's section is: one line when it is wrong."""
    values = executor_values(text)
    try:
        return ExecutorConfig.model_validate(values, context={"source": "--executor"})
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"--executor {text!r}: {message}") from None
