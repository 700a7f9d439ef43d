"""The store's schema: the tables every driver keeps (core tables, tables other layers own,
the leases; their columns, keys and indexes), their rows as TypedDicts (what
``StoreBackend`` returns), and the small helpers every part of the store shares (the SQLite
index file name, ``now_iso``, ``typed_rows``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TypedDict, TypeVar, cast

INDEX = "index.db"
T = TypeVar("T")

#: one value of a stored row, as SQLite and PostgreSQL return it (a blob's bytes are
#: not read as a row: ``get_blob``)
Cell = str | int | float | None


class TableSpec(TypedDict):
    """A table: its columns (name → Python type of the value), its primary key and the
    column lists it is indexed on (what listings sort and filter by)."""

    columns: dict[str, type]
    pk: str
    indexes: list[tuple[str, ...]]


class CassetteColumns(TypedDict):
    """A cassette row's columns derived from its episode (``integrity.cassette_columns``)."""

    id: str
    kind: str
    harness_sha: str
    task_id: str
    task_digest: str
    model: str
    endpoint: str
    model_revision: str
    seed: int
    config_digest: str
    key_json: str
    digest: str
    n_llm: int
    n_env: int
    reward: float | None
    passed: int | None  # None: no grade (nor for infra_failure)
    infra_failure: int | None
    tokens: int


class CassetteRow(CassetteColumns):
    """A ``cassettes`` row as stored: the derived columns, the document's hash, the time."""

    doc: str
    created_at: str


class RunsRow(TypedDict):
    """A ``runs`` row (a run, training, verdict, … document) as stored; ``doc`` is its hash."""

    id: str
    kind: str
    name: str
    harness_sha: str
    model: str
    endpoint: str
    config_digest: str
    doc: str
    created_at: str


def typed_rows(shape: type[T], rows: Iterable[Mapping[str, object]]) -> list[T]:
    """Rows as the driver returns them (sqlite3, sqlite-utils and psycopg are untyped here)
    typed as the table's TypedDict ``shape``: the one place a row gets its type. ``shape``
    names the columns selected (tests/cassette/test_row_shapes.py checks every shape
    against ``SCHEMA``)."""
    del shape  # it names the type only
    return cast(list[T], [dict(r) for r in rows])


def as_rows(shape: type[T], columns: Sequence[str], values: Iterable[Sequence[object]]) -> list[T]:
    """Tuples of ``columns`` (a cursor's rows) as ``shape`` rows (:func:`typed_rows`)."""
    return typed_rows(shape, (dict(zip(columns, v, strict=True)) for v in values))


SCHEMA: dict[str, TableSpec] = {
    "blobs": {"columns": {"hash": str, "size": int, "data": bytes}, "pk": "hash", "indexes": []},
    "cassettes": {
        "columns": {
            "id": str,
            "kind": str,
            "harness_sha": str,
            "task_id": str,
            "task_digest": str,
            "model": str,
            "endpoint": str,
            "model_revision": str,
            "seed": int,
            "config_digest": str,
            "key_json": str,
            "doc": str,
            "digest": str,
            "n_llm": int,
            "n_env": int,
            "reward": float,
            "passed": int,
            "infra_failure": int,
            "tokens": int,
            "created_at": str,
        },
        "pk": "id",
        # reuse looks episodes up by task and seed; listings page by time (the viewer within a
        # kind, `cassettes ls` over all) and the viewer's filters offer each column's values
        "indexes": [
            ("task_id", "seed"),
            ("kind", "created_at", "id"),
            ("created_at", "id"),
            ("kind", "task_id"),
            ("kind", "seed"),
            ("kind", "model"),
            ("kind", "harness_sha"),
        ],
    },
    "runs": {
        "columns": {
            "id": str,
            "kind": str,
            "name": str,
            "harness_sha": str,
            "model": str,
            "endpoint": str,
            "config_digest": str,
            "doc": str,
            "created_at": str,
        },
        "pk": "id",
        "indexes": [("kind", "config_digest")],
    },
    "trees": {"columns": {"sha": str, "manifest": str}, "pk": "sha", "indexes": []},
}


#: Tables other layers own, created on their first write (never by a read).
EXTRA_TABLES: dict[str, TableSpec] = {
    "certificates": {
        "columns": {
            "id": str,
            "task_id": str,
            "task_digest": str,
            "env_kind": str,
            "image_id": str,
            "status": str,
            "reason": str,
            "run_id": str,
            "episodes": int,
            "doc": str,
            "created_at": str,
        },
        "pk": "id",
        "indexes": [],
    },
}

#: What live writers are about to reference (``leases.py``): one row per (writer, table, key).
LEASES: TableSpec = {
    "columns": {"owner": str, "tbl": str, "key": str, "host": str, "pid": int, "taken": float},
    "pk": "owner, tbl, key",
    "indexes": [],
}

#: Every table a driver keeps: the core ones, those other layers own, the leases.
TABLES: dict[str, TableSpec] = {**SCHEMA, **EXTRA_TABLES, "leases": LEASES}


def key_columns(spec: TableSpec) -> tuple[str, ...]:
    """The primary key's columns (``pk`` names them, comma-separated)."""
    return tuple(c.strip() for c in spec["pk"].split(","))


def now_iso() -> str:
    """Wall-clock time for index rows only (never part of a key or a digest)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
