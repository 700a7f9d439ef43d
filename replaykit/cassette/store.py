"""The cassette store: a sqlite-utils index plus content-addressed blobs, in one file.

Layout of a store folder (default ``./cassettes``)::

    index.db   tables: cassettes, runs, trees, blobs (+ trainings, verdicts, ...)
    cache/     materialised harness trees (safe to delete)

Every write of an episode (its blobs, its document, its index row) is one SQLite
transaction, so a process killed mid-record leaves a readable store and never a
half cassette. Look-ups are by key: no scan of a whole cassette.

Every read is verified (:mod:`~replaykit.cassette.integrity`): a blob against its
content address, a document against its row's id, a cassette row's cached columns
against its events. Damage raises :class:`~replaykit.errors.StoreCorrupt`.
``Store(root, readonly=True)`` (replay, audit, listings, export) refuses a missing
store instead of creating one, cannot write (``PRAGMA query_only``) and
materialises harness trees in a temporary folder, so the store stays byte-identical.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from urllib.parse import quote
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import sqlite_utils

from replaykit.cassette.codec import READABLE_FORMATS, Blobs, decode_episode, encode_episode, put
from replaykit.cassette.events import Episode
from replaykit.cassette.integrity import (
    blob_ok,
    cassette_columns,
    cassette_mismatches,
    doc_mismatches,
    run_episode_mismatches,
)
from replaykit.determinism import canonical_json, sha256_hex
from replaykit.errors import CassetteNotFound, StoreCorrupt, StoreError

if TYPE_CHECKING:
    from replaykit.cassette.backend import StoreBackend

SCHEMA: dict[str, dict[str, Any]] = {
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


def _retry_locked(fn: Any, seconds: float = 30.0) -> Any:
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


INDEX = "index.db"

#: Tables other layers own, created on their first write (never by a read).
EXTRA_TABLES: dict[str, dict[str, Any]] = {
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


class Store:
    """A folder holding ``index.db``. Opened lazily; safe for one writer at a time.

    The only module that speaks SQL: everything else asks through the named queries
    below (``find_trainings``, ``find_proxy_sessions``, certificates, bundle rows, ...);
    :class:`replaykit.cassette.backend.StoreBackend` lists what a second backend provides.
    """

    def __init__(self, root: Path | str, readonly: bool = False) -> None:
        self.root = Path(root)
        self.readonly = readonly
        self._db: sqlite_utils.Database | None = None
        self._checked: dict[
            str, tuple[str, dict[str, Any]]
        ] = {}  # cassette id -> (doc hash, derived columns)
        self._scratch: Path | None = None

    # -- plumbing ---------------------------------------------------------------
    @property
    def db(self) -> sqlite_utils.Database:
        if self._db is None and self.readonly:
            self._db = self._open_readonly()
        if self._db is None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(self.root / INDEX), timeout=30, isolation_level=None)
                db = sqlite_utils.Database(conn)
                _retry_locked(lambda: db.execute("PRAGMA journal_mode=WAL"))
                db.execute("PRAGMA synchronous=NORMAL")
                _retry_locked(lambda: self._ensure_schema(db))
            except (sqlite3.DatabaseError, OSError) as exc:
                raise StoreError(
                    f"cannot open store {self.root}: {exc}; check the path or pass --store"
                ) from exc
            self._db = db
        return self._db

    def _open_readonly(self) -> sqlite_utils.Database:
        path = self.root / "index.db"
        if not path.is_file():
            raise StoreError(f"no store at {self.root} (no index.db); check --store or $REPLAYKIT_STORE")
        try:
            conn = sqlite3.connect(
                f"file:{quote(str(path.resolve()))}?mode=rw", uri=True, timeout=30, isolation_level=None
            )
            conn.execute("PRAGMA query_only=ON")  # reading never writes
            db = sqlite_utils.Database(conn)
            missing = [name for name in SCHEMA if not db.table(name).exists()]
        except (sqlite3.DatabaseError, OSError) as exc:
            raise StoreError(f"cannot open store {self.root}: {exc}; check the path or pass --store") from exc
        if missing:
            raise StoreError(f"{path} is not a replaykit store (no table {missing[0]!r}); check --store")
        return db

    @staticmethod
    def _ensure_schema(db: sqlite_utils.Database) -> None:
        for name, spec in SCHEMA.items():
            if not db.table(name).exists():
                db.table(name).create(spec["columns"], pk=spec["pk"])
        db.table("cassettes").create_index(["task_id", "seed"], if_not_exists=True)
        have = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'view'").fetchall()}
        for name, sql in VIEWS.items():  # created with the schema; an existing view is left as it is
            if name not in have:
                db.execute(f"CREATE VIEW IF NOT EXISTS [{name}] AS {sql}")

    def exists(self) -> bool:
        """Whether this folder holds a store (checking never creates one)."""
        return (self.root / INDEX).is_file()

    def _table(self, name: str) -> sqlite_utils.db.Table:
        """A table, created on first use when another layer owns it (``EXTRA_TABLES``)."""
        table = self.db.table(name)
        if (
            name in EXTRA_TABLES and not table.exists() and not self.readonly
        ):  # read-only: an absent table reads as empty
            table.create(EXTRA_TABLES[name]["columns"], pk=EXTRA_TABLES[name]["pk"])
        return table

    def _has_table(self, name: str) -> bool:
        return self.db.table(name).exists()

    def close(self) -> None:
        if self._db is not None:
            self._db.conn.close()
            self._db = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def writable(self) -> None:
        """Refuse a write through a read-only store (replay, audit, listings, export)."""
        if self.readonly:
            raise StoreError(f"store {self.root} is open read-only (replay, audit and listings never write)")

    def corrupt(self, what: str, where: str = "") -> StoreCorrupt:
        return StoreCorrupt(what, where, str(self.root))

    # -- blobs -----------------------------------------------------------------
    def _write_blobs(self, blobs: Blobs) -> None:
        self.writable()
        self.db.conn.executemany(
            "INSERT OR IGNORE INTO blobs(hash, size, data) VALUES (?, ?, ?)",
            ((h, len(d), d) for h, d in blobs.items()),
        )

    def put_blob(self, data: bytes) -> str:
        blobs: Blobs = {}
        digest = put(blobs, data)
        with self.db.atomic():
            self._write_blobs(blobs)
        return digest

    def get_blob(self, digest: str) -> bytes:
        """The blob at ``digest``, verified against its content address."""
        row = self.db.conn.execute("SELECT data, size FROM blobs WHERE hash = ?", (digest,)).fetchone()
        if row is None:
            raise self.corrupt(f"blob {str(digest)[:12]}… is missing (re-import its bundle)")
        data = bytes(row[0]) if row[0] is not None else b""
        if not blob_ok(digest, data, row[1]):
            raise self.corrupt(f"blob {digest[:12]}… does not match its content address")
        return data

    def has_blob(self, digest: str) -> bool:
        return self.db.conn.execute("SELECT 1 FROM blobs WHERE hash = ?", (digest,)).fetchone() is not None

    def put_json(self, value: Any) -> str:
        return self.put_blob(canonical_json(value).encode("utf-8"))

    def get_json(self, digest: str) -> Any:
        return json.loads(self.get_blob(digest))

    def _write_row(self, table: str, row: dict[str, Any], blobs: Blobs) -> None:
        """Blobs + one row in one transaction; ``created_at`` is set once, at first write."""
        pk = SCHEMA[table]["pk"]
        self.writable()
        with self.db.atomic():
            self._write_blobs(blobs)
            old = self.db.conn.execute(
                f"SELECT created_at FROM [{table}] WHERE [{pk}] = ?", (row[pk],)
            ).fetchone()
            row["created_at"] = old[0] if old and old[0] else now_iso()
            self.db.table(table).insert(row, replace=True)

    # -- episodes ----------------------------------------------------------------
    def put_episode(self, episode: Episode) -> None:
        """Write an episode atomically (replacing one with the same key)."""
        blobs: Blobs = {}
        doc = encode_episode(episode, blobs)
        row = cassette_columns(episode)
        row["doc"] = put(blobs, canonical_json(doc).encode("utf-8"))
        self._write_row("cassettes", row, blobs)
        self._checked.pop(episode.id, None)

    def has(self, cassette_id: str) -> bool:
        return (
            self.db.conn.execute("SELECT 1 FROM cassettes WHERE id = ?", (cassette_id,)).fetchone()
            is not None
        )

    def _row(self, table: str, pk: str, value: str) -> dict[str, Any] | None:
        """One row by primary key (a plain query: sqlite-utils' ``Table.get`` reads the
        table's schema with a PRAGMA on every call)."""
        cursor = self.db.conn.execute(f"SELECT * FROM [{table}] WHERE [{pk}] = ?", (value,))
        row = cursor.fetchone()
        if row is None:
            return None
        return dict(zip((c[0] for c in cursor.description), row, strict=True))

    def cassette_row(self, cassette_id: str) -> dict[str, Any]:
        row = self._row("cassettes", "id", cassette_id)
        if row is None:
            raise CassetteNotFound(
                f"no cassette {cassette_id!r} in store {self.root}; list them with `replaykit cassettes ls`"
            )
        return row

    def get_episode(self, cassette_id: str) -> Episode:
        """Decode a cassette, verifying every blob, its key against its row and its cached columns."""
        row = self.cassette_row(cassette_id)
        where = f"cassette {cassette_id}"
        try:
            doc = self.get_json(row["doc"])
            fmt = doc.get("format") if isinstance(doc, dict) else None
            if isinstance(fmt, int) and fmt > max(
                READABLE_FORMATS
            ):  # written by a newer replaykit, not damage
                raise StoreError(
                    f"{where} has cassette format {doc.get('format')!r}; this replaykit reads {READABLE_FORMATS} — upgrade replaykit"
                )
            episode = decode_episode(doc, self.get_blob)
        except StoreCorrupt as exc:
            raise exc.within(where, str(self.root)) from None
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise self.corrupt(
                f"document {str(row['doc'])[:12]}… is unreadable ({type(exc).__name__}: {str(exc)[:80]})",
                where,
            ) from None
        derived = cassette_columns(episode)
        if derived["id"] != cassette_id:
            raise self.corrupt(
                f"cassette row {cassette_id} points at the document of cassette {derived['id']}"
            )
        bad = cassette_mismatches(row, episode, derived)
        if bad:
            raise self.corrupt(f"cassette {cassette_id}: column(s) {', '.join(bad)} do not match its events")
        self._checked[cassette_id] = (row["doc"], derived)
        return episode

    def verified_columns(self, cassette_id: str) -> dict[str, Any]:
        """A cassette's derived columns, checked against its events (decoded once per store object)."""
        checked = self._checked.get(cassette_id)
        if checked is None or checked[0] != self.cassette_row(cassette_id)["doc"]:
            self.get_episode(cassette_id)
            checked = self._checked[cassette_id]
        return dict(checked[1])

    def check_run(self, run: dict[str, Any]) -> None:
        """Every episode entry of a run document against its cassette's events (what verdicts are computed from)."""
        for entry in run.get("episodes") or []:
            cid = str(entry.get("cassette_id"))
            bad = run_episode_mismatches(entry, self.verified_columns(cid))
            if bad:
                raise self.corrupt(
                    f"run {run.get('run_id')}: episode {cid} field(s) {', '.join(bad)} do not match its cassette"
                )

    def list_cassettes(
        self, where: str | None = None, params: Iterable[Any] = (), limit: int | None = None
    ) -> list[dict[str, Any]]:
        rows = self.db.table("cassettes").rows_where(
            where, list(params), order_by="created_at, id", limit=limit
        )
        return [dict(r) for r in rows]

    def cassette_summaries(self, columns: tuple[str, ...], limit: int | None = None) -> list[dict[str, Any]]:
        """Index columns of the newest ``limit`` cassettes (all when None), oldest first;
        episode documents are not read."""
        cols = ", ".join(f"[{c}]" for c in columns)
        sql = f"SELECT {cols} FROM cassettes ORDER BY created_at DESC, id DESC"
        args: tuple[Any, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            args = (int(limit),)
        rows = self.db.conn.execute(sql, args).fetchall()
        return [dict(zip(columns, r, strict=True)) for r in reversed(rows)]

    def count_cassettes(self) -> int:
        return int(self.db.conn.execute("SELECT COUNT(*) FROM cassettes").fetchone()[0])

    # -- runs ------------------------------------------------------------------
    def put_run(self, run: dict[str, Any]) -> None:
        self.put_doc(
            run["run_id"],
            run.get("kind", "measure"),
            run,
            name=run.get("name", ""),
            harness_sha=run["harness_sha"],
            model=run["model"]["name"],
            endpoint=run["model"]["endpoint"],
            config_digest=run["config_digest"],
        )

    def put_doc(self, doc_id: str, kind: str, doc: dict[str, Any], **columns: Any) -> None:
        """Store a document (run, training, verdict, ...) in the ``runs`` table by id."""
        blobs: Blobs = {}
        doc_hash = put(blobs, canonical_json(doc).encode("utf-8"))
        row = {"name": "", "harness_sha": "", "model": "", "endpoint": "", "config_digest": ""}
        row.update(columns)
        row.update({"id": doc_id, "kind": kind, "doc": doc_hash})
        self._write_row("runs", row, blobs)

    def verified_doc(self, row: dict[str, Any]) -> dict[str, Any]:
        """A runs-table row's document, its blob verified and its id checked against the row."""
        where = f"{row.get('kind') or 'document'} {row['id']}"
        try:
            doc = self.get_json(row["doc"])
        except StoreCorrupt as exc:
            raise exc.within(where, str(self.root)) from None
        except ValueError:
            raise self.corrupt(f"document {str(row['doc'])[:12]}… is not JSON", where) from None
        bad = doc_mismatches(row, doc)
        if bad:
            raise self.corrupt(f"{where}: {'; '.join(bad)} (row and document disagree)")
        return doc

    def has_doc(self, doc_id: str, doc_digest: str) -> bool:
        """Is ``doc_id`` stored with exactly the document whose canonical JSON hashes to ``doc_digest``?"""
        row = self.db.conn.execute("SELECT doc FROM runs WHERE id = ?", (doc_id,)).fetchone()
        return row is not None and row[0] == doc_digest

    def get_doc(self, doc_id: str, kind: str | None = None) -> dict[str, Any]:
        what = kind or "document"
        full = self.resolve_id("runs", doc_id, what=what)
        row = self._runs_row(full)
        if kind and row["kind"] != kind:
            self.verified_doc(dict(row))  # a row whose kind was damaged is corruption, not a wrong id
            raise CassetteNotFound(f"{doc_id!r} is a {row['kind']}, not a {kind}, in store {self.root}")
        return self.verified_doc(dict(row))

    def doc_kind(self, doc_id: str) -> str:
        full = self.resolve_id("runs", doc_id, what="run or training")
        return str(self._runs_row(full)["kind"])

    def _runs_row(self, full: str) -> dict[str, Any]:
        row = self._row("runs", "id", full)
        assert row is not None  # resolve_id found it
        return row

    def get_run(self, run_id: str) -> dict[str, Any]:
        full = self.resolve_id("runs", run_id, what="run")
        row = self._runs_row(full)
        if row["kind"] != "measure":
            self.verified_doc(dict(row))  # a row whose kind was damaged is corruption, not a wrong id
            raise CassetteNotFound(f"{run_id!r} is a {row['kind']}, not a run, in store {self.root}")
        return self.verified_doc(dict(row))

    def list_runs(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.db.table("runs").rows_where(order_by="created_at, id")]

    def resolve_id(self, table: str, prefix: str, what: str, column: str = "id") -> str:
        """A full id from a unique prefix (any length, as git does)."""
        like = prefix.replace("%", "").replace("_", "") + "%" if prefix else prefix
        rows = self.db.conn.execute(
            f"SELECT {column} FROM [{table}] WHERE {column} = ? OR {column} LIKE ? ORDER BY {column} = ? DESC LIMIT 2",
            (prefix, like, prefix),
        ).fetchall()
        if not rows:
            raise CassetteNotFound(f"no {what} {prefix!r} in store {self.root}; check the id or pass --store")
        if len(rows) > 1 and rows[0][0] != prefix:
            raise CassetteNotFound(
                f"{what} id {prefix!r} is ambiguous in store {self.root}; give more characters"
            )
        return str(rows[0][0])

    # -- removal (replaykit.exchange.gc decides what; these only execute) ------------
    def index_rows(self, table: str, columns: str) -> list[tuple[Any, ...]]:
        """``columns`` of every row of a core table (``runs``, ``cassettes``, ``trees``, ``blobs``)."""
        if table not in SCHEMA:
            raise StoreError(f"unknown store table {table!r}")
        return [tuple(r) for r in self.db.conn.execute(f"SELECT {columns} FROM [{table}]")]

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """One write transaction taken up front (BEGIN IMMEDIATE): what is read inside
        cannot change before what is written inside commits."""
        self.writable()
        conn = self.db.conn
        _retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def delete_rows(self, table: str, keys: Iterable[str]) -> int:
        """Delete rows of a core table by primary key (call inside ``write_lock()``)."""
        if table not in SCHEMA:
            raise StoreError(f"unknown store table {table!r}")
        pk = SCHEMA[table]["pk"]
        cursor = self.db.conn.executemany(f"DELETE FROM [{table}] WHERE [{pk}] = ?", ((k,) for k in keys))
        return int(cursor.rowcount)

    # -- named queries ---------------------------------------------------------------
    def find_docs(self, kind: str, config_digest: str) -> list[dict[str, Any]]:
        """Documents of ``kind`` whose ``config_digest`` column matches, oldest first."""
        rows = self.db.conn.execute(
            "SELECT doc FROM runs WHERE kind = ? AND config_digest = ? ORDER BY created_at, id",
            (kind, config_digest),
        ).fetchall()
        return [self.get_json(r[0]) for r in rows]

    def find_trainings(self, spec_digest: str) -> list[dict[str, Any]]:
        """Training documents recorded with this spec (a resumed training is one of them)."""
        return self.find_docs("training", spec_digest)

    def find_proxy_sessions(self, name: str, endpoint: str | None = None) -> list[dict[str, Any]]:
        """Index rows of the proxy sessions called ``name`` (for one upstream endpoint), oldest first."""
        sql, args = "SELECT * FROM cassettes WHERE kind = ? AND task_id = ?", ["proxy", name]
        if endpoint is not None:
            sql, args = sql + " AND endpoint = ?", [*args, endpoint]
        cursor = self.db.conn.execute(sql + " ORDER BY created_at, id", args)
        cols = [c[0] for c in cursor.description]
        return [dict(zip(cols, r, strict=True)) for r in cursor.fetchall()]

    def get_certificate(self, cert_id: str) -> dict[str, Any] | None:
        """A certification row by id (``doc`` decoded), or None. Never creates the table."""
        if not self._has_table("certificates"):
            return None
        row = self._row("certificates", "id", cert_id)
        if row is None:
            return None
        row["doc"] = json.loads(row["doc"]) if row.get("doc") else {}
        return row

    def put_certificate(self, row: dict[str, Any]) -> None:
        with self.db.atomic():
            self._table("certificates").insert(row, replace=True)

    # -- rows, for bundles (export and import) ------------------------------------------
    def get_row(self, table: str, key: str) -> dict[str, Any] | None:
        """One row of a core table by primary key, as stored."""
        if table not in SCHEMA:
            raise StoreError(f"unknown store table {table!r}")
        return self._row(table, SCHEMA[table]["pk"], key)

    def present(self, table: str, keys: list[str], column: str | None = None) -> dict[str, Any]:
        """Of ``keys``, those present in a core table → their ``column`` (or True)."""
        if table not in SCHEMA:
            raise StoreError(f"unknown store table {table!r}")
        if not self.exists():
            return {}
        pk = SCHEMA[table]["pk"]
        value = f"[{column}]" if column else "1"
        found: dict[str, Any] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            sql = f"SELECT [{pk}], {value} FROM [{table}] WHERE [{pk}] IN ({','.join('?' * len(chunk))})"
            found.update((str(r[0]), r[1]) for r in self.db.conn.execute(sql, chunk))
        return found

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One write transaction: everything inside commits together or not at all."""
        with self.db.atomic():
            yield

    def insert_blobs(self, blobs: dict[str, bytes]) -> None:
        """Content-addressed blobs (``hash → bytes``; present ones are left alone)."""
        self._write_blobs(blobs)

    def insert_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Rows of a core table, as exported (an existing primary key is an error)."""
        if table not in SCHEMA:
            raise StoreError(f"unknown store table {table!r}")
        if rows:
            self.db.table(table).insert_all(rows, pk=SCHEMA[table]["pk"], alter=True)

    # -- harness trees ---------------------------------------------------------
    def put_tree(self, sha: str, files: dict[str, tuple[int, bytes]]) -> None:
        """Store the files of a harness commit so replay needs no git repository."""
        if self.has_tree(sha):
            return
        self.writable()
        blobs: Blobs = {}
        manifest = {path: [mode, put(blobs, data)] for path, (mode, data) in sorted(files.items())}
        with self.db.atomic():
            self._write_blobs(blobs)
            self.db.table("trees").insert({"sha": sha, "manifest": canonical_json(manifest)}, replace=True)

    def has_tree(self, sha: str) -> bool:
        return self.db.conn.execute("SELECT 1 FROM trees WHERE sha = ?", (sha,)).fetchone() is not None

    def _tree_manifest(self, sha: str) -> dict[str, tuple[int, str]]:
        row = self.db.conn.execute("SELECT manifest FROM trees WHERE sha = ?", (sha,)).fetchone()
        if row is None:
            raise CassetteNotFound(
                f"harness tree {sha[:12]} is not in store {self.root}; record a run of it first"
            )
        try:
            return {str(p): (int(m), str(h)) for p, (m, h) in json.loads(row[0]).items()}
        except (TypeError, ValueError, AttributeError):
            raise self.corrupt(
                "its manifest is not a {path: [mode, blob]} mapping", f"harness tree {sha[:12]}"
            ) from None

    def get_tree(self, sha: str) -> dict[str, tuple[int, bytes]]:
        try:
            return {p: (m, self.get_blob(h)) for p, (m, h) in self._tree_manifest(sha).items()}
        except StoreCorrupt as exc:
            raise exc.within(f"harness tree {sha[:12]}", str(self.root)) from None

    def _cache_ok(self, target: Path, sha: str) -> bool:
        """A materialised tree is used only while every file still matches the stored manifest."""
        if not (target / ".complete").exists():
            return False
        try:
            return all(
                sha256_hex((target / p).read_bytes()) == h for p, (_, h) in self._tree_manifest(sha).items()
            )
        except OSError:
            return False

    def materialise_tree(self, sha: str, files: dict[str, tuple[int, bytes]] | None = None) -> Path:
        """Write a stored harness tree under ``cache/trees/<sha>`` (atomically) and return it.

        A read-only store writes it in a temporary folder instead (removed by ``close``);
        ``files`` stands in for a tree the store does not hold (e.g. ``replay --harness REF``)."""
        if files is not None and not self.has_tree(sha):
            target = self._scratch_dir() / sha
            if not (target / ".complete").exists():
                self._write_tree(target, sha, files)
            return target
        target = self._scratch_dir() / sha if self.readonly else self.root / "cache" / "trees" / sha
        if not self._cache_ok(target, sha):
            self._write_tree(target, sha, self.get_tree(sha))
        return target

    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="replaykit-trees-"))
            atexit.register(shutil.rmtree, self._scratch, True)
        return self._scratch

    @staticmethod
    def _write_tree(target: Path, sha: str, files: dict[str, tuple[int, bytes]]) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=target.parent))
        for path, (mode, data) in files.items():
            dest = tmp / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            os.chmod(dest, 0o755 if mode & 0o111 else 0o644)
        (tmp / ".complete").write_text(sha)
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)


if TYPE_CHECKING:
    _conforms: type[StoreBackend] = Store  # mypy: Store implements the backend protocol
