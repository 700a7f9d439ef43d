"""Reading a YAML config so every error can name its line.

:func:`read_yaml` parses a config file with a loader that refuses a key given twice in
one mapping (YAML would silently keep the last) and keeps the line of every key and
list item; :func:`line_of` finds the line of a field path (the nearest enclosing key
when the field itself was not written). Syntax errors name their line too, and so do a
recursive alias (an anchor used inside itself) and bytes that are not UTF-8.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from replaykit.core.errors import ConfigError

#: a config field's path (``("panel", "seeds", 0)``) → the 1-based line it was written on
Lines = dict[tuple[str | int, ...], int]


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader, except that a key given twice in one mapping is an error."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise _Duplicate(key, line, seen[key])
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _Duplicate(Exception):
    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


class _Recursive(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


def _walk(node: yaml.Node, path: tuple[str | int, ...], lines: Lines, inside: tuple[int, ...] = ()) -> None:
    """Each key's line; a node found inside itself (an alias of an enclosing anchor) raises."""
    if id(node) in inside:
        raise _Recursive(node.start_mark.line + 1)
    inside = (*inside, id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                child = (*path, str(key_node.value))
                lines.setdefault(child, key_node.start_mark.line + 1)
                _walk(value_node, child, lines, inside)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines.setdefault((*path, index), item.start_mark.line + 1)
            _walk(item, (*path, index), lines, inside)


def _text(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"config file {path}, line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); save it as UTF-8"
        ) from None


def read_yaml(path: Path) -> tuple[Any, Lines]:
    """The document in ``path`` and the line of each key; a syntax error or a duplicate key
    is one ``ConfigError`` line naming the file and the line."""
    text = _text(path)
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except _Duplicate as dup:
        raise ConfigError(
            f"config file {path}, line {dup.line}: key {dup.key!r} is given twice "
            f"(first on line {dup.first}); keep one"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"config file {path}{where}: not valid YAML: {problem}") from None
    lines: Lines = {}
    try:
        if root is not None:
            _walk(root, (), lines)
    except _Recursive as rec:
        raise ConfigError(
            f"config file {path}, line {rec.line}: the anchor there is used inside itself (a recursive"
            " alias); a config cannot refer to itself"
        ) from None
    return data, lines


def line_of(lines: Lines, loc: tuple[str | int, ...]) -> int | None:
    """The line of ``loc``, or of the nearest enclosing key that was written."""
    for end in range(len(loc), 0, -1):
        found = lines.get(tuple(str(p) if isinstance(p, str) else p for p in loc[:end]))
        if found is not None:
            return found
    return None
