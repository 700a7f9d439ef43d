"""Command-line values converted without pydantic where the conversion is plain.

typer (0.29) converts every parameter value through a pydantic ``TypeAdapter`` built on first
use: importing pydantic's validators and building the adapter costs about as much CPU as
importing typer itself, on every command that takes an option. Most values need none of it:
a ``str`` option's value is the string, a choice is one of its names, a default is already
of its type. :func:`plain_runtime` converts those directly and hands everything else — a
value that is not plain, and every invalid value, so their errors stay typer's own words — to
typer's pydantic conversion, built only then. ``tests/test_cli_start.py`` holds the two equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from typer._coercion import RuntimeParam, build_runtime_param
from typer._param_types import coerce_cli_choice
from typer._typing import is_literal_type, literal_values
from typer.core import TyperArgument, TyperOption

#: a marker: the value is not plain, typer's own conversion takes it
NOT_PLAIN: Any = object()
_DIGITS = re.compile(r"[0-9]{1,15}")


def _choices(annotation: Any) -> tuple[Any, ...] | None:
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return tuple(annotation)
    if is_literal_type(annotation):
        return tuple(literal_values(annotation))
    return None


def plain_value(param: TyperOption | TyperArgument, value: Any, ctx: Any) -> Any:
    """``value`` converted as typer would, or :data:`NOT_PLAIN`."""
    desc = param.type_descriptor
    info = desc.parameter_info
    annotation = desc.annotation
    if info.parser is not None or desc.file_annotation is not None:
        return NOT_PLAIN
    choices = _choices(annotation)
    if choices is not None:
        try:
            return coerce_cli_choice(value, choices=choices, case_sensitive=info.case_sensitive, ctx=ctx)
        except ValueError:
            return NOT_PLAIN  # typer words the refusal
    if annotation is str and type(value) is str:
        return value
    if annotation in (int, float) and not info.clamp:
        number = value if type(value) is annotation else NOT_PLAIN
        if annotation is int and type(value) is str and _DIGITS.fullmatch(value):
            number = int(value)
        if number is not NOT_PLAIN and _within(number, info.min, info.max):
            return number
    return NOT_PLAIN


def _within(number: float, low: float | None, high: float | None) -> bool:
    """Inside the option's declared range (outside it, typer says so in its words)."""
    return (low is None or number >= low) and (high is None or number <= high)


@dataclass(frozen=True)
class PlainRuntimeParam(RuntimeParam):
    """A parameter's conversion: plain values here, the rest by typer's (pydantic's) own."""

    param: TyperOption | TyperArgument = field(compare=False)
    typed: list[RuntimeParam] = field(default_factory=list, compare=False)

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        plain = plain_value(self.param, value, ctx)
        if plain is not NOT_PLAIN:
            return plain
        if not self.typed:
            self.typed.append(build_runtime_param(self.param.type_descriptor))
        return self.typed[0]._coerce_value(value, param=param, ctx=ctx)


def plain_runtime(param: TyperOption | TyperArgument) -> RuntimeParam:
    desc = param.type_descriptor
    return PlainRuntimeParam(parameter_info=desc.parameter_info, annotation=desc.annotation, param=param)
