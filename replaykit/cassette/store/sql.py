"""The standard SQL both SQL drivers send: identifiers checked against the schema and
quoted, a :data:`~replaykit.cassette.store.driver.Where` as a ``WHERE`` clause, an order as
``ORDER BY``. Each driver passes its own parameter mark (SQLite ``?``, psycopg ``%s``) and
writes the statements its engine spells its own way (upserts, locks, DDL, versions)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from replaykit.cassette.store.driver import AnyOf, Order, Prefix, Value, Where
from replaykit.cassette.store.schema import TABLES
from replaykit.core.errors import StoreError

_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def ident(name: str) -> str:
    """A table or column name, double-quoted (both engines read ``"name"``)."""
    if not _NAME.match(name):
        raise StoreError(f"not a store table or column name: {name!r}")
    return f'"{name}"'


def table(name: str) -> str:
    if name not in TABLES:
        raise StoreError(f"unknown store table {name!r}")
    return ident(name)


def columns(names: Iterable[str] | None) -> str:
    return "*" if names is None else ", ".join(ident(c) for c in names)


def where(match: Where | None, mark: str) -> tuple[str, list[Value]]:
    """``(" WHERE …", parameters)`` for ``match`` (every column must match); empty: no clause."""
    parts: list[str] = []
    args: list[Value] = []
    for column, value in (match or {}).items():
        name = ident(column)
        if isinstance(value, Prefix):
            low, high = value.bounds()
            parts.append(f"{name} >= {mark}")
            args.append(low)
            if high is not None:
                parts.append(f"{name} < {mark}")
                args.append(high)
        elif isinstance(value, AnyOf):
            if not value.values:
                parts.append("1 = 0")
            else:
                parts.append(f"{name} IN ({', '.join([mark] * len(value.values))})")
                args.extend(value.values)
        elif value is None:
            parts.append(f"{name} IS NULL")
        else:
            parts.append(f"{name} = {mark}")
            args.append(value)
    return (" WHERE " + " AND ".join(parts) if parts else ""), args


def distinct(
    table_name: str, column: str, match: Where | None, mark: str, limit: int | None
) -> tuple[str, list[Value]]:
    """The distinct non-NULL values of ``column``, ascending, as a loose index scan (each next value
    the ``MIN`` above the last one: a few index probes per value, whatever the number of rows)."""
    clause, args = where(match, mark)
    col, name = ident(column), table(table_name)
    above = f"{clause} AND {col} > d.v" if clause else f" WHERE {col} > d.v"
    text = (
        f"WITH RECURSIVE d(v) AS (SELECT MIN({col}) FROM {name}{clause}"
        f" UNION ALL SELECT (SELECT MIN({col}) FROM {name}{above}) FROM d WHERE d.v IS NOT NULL)"
        " SELECT v FROM d WHERE v IS NOT NULL"
    )
    params = [*args, *args]
    if limit is not None:
        text += f" LIMIT {mark}"
        params.append(int(limit))
    return text, params


def has_null(table_name: str, column: str, match: Where | None, mark: str) -> tuple[str, list[Value]]:
    clause, args = where({**(match or {}), column: None}, mark)
    return f"SELECT 1 FROM {table(table_name)}{clause} LIMIT 1", args


def order_by(order: Order) -> str:
    return " ORDER BY " + ", ".join(f"{ident(c)}{' DESC' if d else ''}" for c, d in order) if order else ""


__all__ = ["columns", "distinct", "has_null", "ident", "order_by", "table", "where"]
