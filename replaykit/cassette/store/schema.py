"""The store's schema: core tables, browsing views, tables other layers own, their rows
as TypedDicts (what ``StoreBackend`` returns), and the small helpers every part of the
store shares (the index file name, ``now_iso``, waiting out a lock held by another
process, ``typed_rows``)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypedDict, TypeVar, cast

from replaykit.core.records import JSON

INDEX = "index.db"
T = TypeVar("T")

#: one value of a stored row, as SQLite and PostgreSQL return it (a blob's bytes are
#: not read as a row: ``get_blob``)
Cell = str | int | float | None


class TableSpec(TypedDict):
    """A table: its columns (name → Python type of the value) and primary key."""

    columns: dict[str, type]
    pk: str


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


class CassetteFields(TypedDict, total=False):
    """Some columns of a cassette row: those a listing asked for (``cassette_summaries``)."""

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
    passed: int | None
    infra_failure: int | None
    tokens: int
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


class CertificateRow(TypedDict):
    """A ``certificates`` row as stored (``doc``: the evidence, canonical JSON)."""

    id: str
    task_id: str
    task_digest: str
    env_kind: str
    image_id: str
    status: str
    reason: str
    run_id: str
    episodes: int
    doc: str
    created_at: str


class CertificateRecord(TypedDict):
    """A certificate as ``get_certificate`` reads it: the row with ``doc`` decoded."""

    id: str
    task_id: str
    task_digest: str
    env_kind: str
    image_id: str
    status: str
    reason: str
    run_id: str
    episodes: int
    doc: dict[str, JSON]
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
    "blobs": {"columns": {"hash": str, "size": int, "data": bytes}, "pk": "hash"},
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
    },
    "trees": {"columns": {"sha": str, "manifest": str}, "pk": "sha"},
}


# Read-only SQL views for browsing the index (e.g. `datasette cassettes/index.db`):
# documents are JSON blobs, unpacked here with SQLite's JSON functions.
_DOC = "json(CAST((SELECT data FROM blobs WHERE hash = r.doc) AS TEXT))"
VIEWS: dict[str, str] = {
    "episodes": """
        SELECT c.id AS cassette_id, c.task_id, c.seed, c.model, c.endpoint, c.model_revision, c.harness_sha,
               c.reward, c.passed, c.infra_failure, c.tokens, c.n_llm AS llm_calls, c.n_env AS steps,
               c.digest, c.created_at
        FROM cassettes c WHERE c.kind = 'episode'""",
    "run_summaries": f"""
        SELECT r.id AS run_id, r.name, r.harness_sha, r.model, r.endpoint,
               json_extract({_DOC}, '$.solved') AS solved, json_extract({_DOC}, '$.total') AS total,
               json_array_length({_DOC}, '$.cassettes') AS episodes, r.created_at
        FROM runs r WHERE r.kind = 'measure'""",
    "run_episodes": f"""
        SELECT r.id AS run_id, e.cassette_id, e.task_id, e.seed, e.model, e.harness_sha, e.reward, e.passed,
               e.infra_failure, e.tokens, e.llm_calls, e.steps
        FROM runs r, json_each({_DOC}, '$.cassettes') j JOIN episodes e ON e.cassette_id = j.value
        WHERE r.kind = 'measure'""",
    "verdicts": f"""
        SELECT r.id AS verdict_id, json_extract({_DOC}, '$.training_id') AS training_id,
               json_extract({_DOC}, '$.epoch') AS epoch, json_extract({_DOC}, '$.baseline_sha') AS baseline_sha,
               json_extract({_DOC}, '$.candidate_sha') AS candidate_sha,
               json_extract({_DOC}, '$.baseline_run') AS baseline_run, json_extract({_DOC}, '$.candidate_run') AS candidate_run,
               json_extract({_DOC}, '$.verdict.criterion') AS criterion, json_extract({_DOC}, '$.verdict.accept') AS accept,
               json_extract({_DOC}, '$.verdict.loss') AS loss, json_extract({_DOC}, '$.verdict.reason') AS reason,
               json_extract({_DOC}, '$.verdict.new_solves') AS new_solves,
               json_extract({_DOC}, '$.verdict.regressions') AS regressions, r.created_at
        FROM runs r WHERE r.kind = 'verdict'""",
    "trainings": f"""
        SELECT r.id AS training_id, r.name, r.model, json_extract({_DOC}, '$.initial_sha') AS initial_sha,
               json_extract({_DOC}, '$.final_baseline') AS final_baseline,
               json_array_length({_DOC}, '$.epochs') AS epochs,
               (SELECT count(*) FROM json_each({_DOC}, '$.epochs') e
                WHERE json_extract(e.value, '$.decision') = 'accepted') AS accepted, r.created_at
        FROM runs r WHERE r.kind = 'training'""",
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
    },
}


def retry_locked(fn: Callable[[], T], seconds: float = 30.0) -> T:
    """Run ``fn``, waiting while another process holds the database (e.g. creating the schema)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def now_iso() -> str:
    """Wall-clock time for index rows only (never part of a key or a digest)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
