"""A config's errors as one line each: the field, the value given, what is wrong.

:func:`validation_line` words a pydantic error (an unknown key lists the known ones, a missing
one says to add it, a value is shown as YAML spells it); :func:`config_error` places a line in
the config file at the line its field was written on (``config_yaml.line_of``);
:func:`override_error` names the override (or its command-line flag) that set a key instead of
the file, which does not hold it. ``config.py`` raises what these word.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from replaykit.core.errors import ConfigError
from replaykit.episodes.config_yaml import Lines, line_of


def validation_line(exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None) -> str:
    """A pydantic error as one line: the field, the value given, what is wrong (``model``: the
    schema, so an unknown key can list the known ones)."""
    return located_line(exc, prefix, model)[1]


def located_line(
    exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
) -> tuple[tuple[str | int, ...], str]:
    """The field's path and the line describing the first error."""
    err = exc.errors()[0]
    loc = tuple(p for p in (*prefix.strip(".").split("."), *err["loc"]) if p != "")
    field = ".".join(str(p) for p in loc)
    value = err.get("input")
    shown = (
        ""
        if err["type"] in ("missing", "extra_forbidden") or isinstance(value, (dict, BaseModel))
        else f" (got {_short(value)})"
    )
    message = str(err["msg"]).removeprefix("Value error, ")
    if "(got " in message:  # a validator that names the value itself: named once
        shown = ""
    if message.startswith("field '"):  # a nested model's line (an env kind's settings): already placed
        named = message[len("field '") :].split("'", 1)[0]
        return tuple(int(p) if p.isdigit() else p for p in named.split(".")), message
    if err["type"] == "extra_forbidden":
        message = "unknown key" + _known_keys(model, tuple(err["loc"])[:-1])
    elif err["type"] == "missing":
        message = "required; add it"
    return loc, f"field {field!r}: {message}{shown}"


def _known_keys(model: type[BaseModel] | None, loc: tuple[str | int, ...]) -> str:
    """``; known: a, b`` — the keys the section at ``loc`` takes (when its schema is known)."""
    for part in loc:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return ""
        annotation = model.model_fields[part].annotation
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    if model is None:
        return ""
    fields = [name for name, f in model.model_fields.items() if not f.exclude]
    return f"; known: {', '.join(fields)}"


def override_error(
    overrides: Mapping[str, object] | None,
    flags: Mapping[str, str] | None,
    loc: tuple[str | int, ...],
    line: str,
) -> ConfigError | None:
    """An error in a key an override set names the override (its flag when known), never the
    config file, which does not hold it; None for any other key."""
    for dotted, value in (overrides or {}).items():
        parts = tuple(dotted.split("."))
        if tuple(str(p) for p in loc[: len(parts)]) == parts:
            said = line.split(": ", 1)[1] if line.startswith("field '") and ": " in line else line
            flag = (flags or {}).get(dotted)
            named = (
                f"{flag} {value}"
                if flag and not isinstance(value, (dict, bool))
                else flag or f"override {dotted}"
            )
            return ConfigError(f"{named}: {said}")
    return None


def config_error(source: Path | None, lines: Lines, loc: tuple[str | int, ...], line: str) -> ConfigError:
    """One line: the file, the line the field was written on (when it was), what is wrong."""
    if source is None:
        return ConfigError(f"config {line}")
    at = line_of(lines, loc)
    return ConfigError(f"config file {source}{f', line {at}' if at else ''}: {line}")


def _short(value: Any) -> str:
    """The value as the config spells it (YAML's true/false/null for Python's booleans and None)."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    text = " ".join(repr(value).split())
    return text if len(text) <= 60 else text[:57] + "..."
