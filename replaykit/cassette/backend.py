"""What a store backend provides: the protocol the rest of replaykit is written against.

``Store`` (the ``store`` package, SQLite through sqlite-utils plus content-addressed
blobs) is the one implementation and the only package that speaks SQL. A second backend (a
server database, an object store for blobs) is one file implementing
:class:`StoreBackend`: content-addressed blobs by hash, episodes and documents by id,
and the named queries below; ``mypy`` checks that ``Store`` conforms.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from replaykit.cassette.events import Episode
from replaykit.core.records import RunDoc


class BlobStore(Protocol):
    """Content-addressed bytes: the key is the sha256 of the data."""

    def put_blob(self, data: bytes) -> str: ...

    def get_blob(self, digest: str) -> bytes: ...

    def has_blob(self, digest: str) -> bool: ...


class Index(Protocol):
    """Episodes, documents and harness trees by id, and the named queries."""

    root: Path

    def exists(self) -> bool: ...

    # episodes (cassettes)
    def put_episode(self, episode: Episode) -> None: ...

    def get_episode(self, cassette_id: str) -> Episode: ...

    def has(self, cassette_id: str) -> bool: ...

    def cassette_row(self, cassette_id: str) -> dict[str, Any]: ...

    def cassette_summaries(
        self, columns: tuple[str, ...], limit: int | None = None
    ) -> list[dict[str, Any]]: ...

    def count_cassettes(self) -> int: ...

    # documents: runs, trainings, verdicts, ...
    def put_doc(self, doc_id: str, kind: str, doc: dict[str, Any], **columns: Any) -> None: ...

    def get_doc(self, doc_id: str, kind: str | None = None) -> dict[str, Any]: ...

    def get_run(self, run_id: str) -> RunDoc: ...

    def doc_kind(self, doc_id: str) -> str: ...

    def list_runs(self) -> list[dict[str, Any]]: ...

    def resolve_id(self, table: str, prefix: str, what: str, column: str = "id") -> str: ...

    # named queries
    def find_trainings(self, spec_digest: str) -> list[dict[str, Any]]: ...

    def find_proxy_sessions(self, name: str, endpoint: str | None = None) -> list[dict[str, Any]]: ...

    def get_certificate(self, cert_id: str) -> dict[str, Any] | None: ...

    def put_certificate(self, row: dict[str, Any]) -> None: ...

    # browsing (the viewer): pages, filter values, documents of a kind, a change token
    def episode_page(
        self,
        filters: dict[str, Any] | None = None,
        sort: str = "created_at",
        descending: bool = True,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[dict[str, Any]], int]: ...

    def episode_facets(self, kind: str = "episode") -> dict[str, list[Any]]: ...

    def doc_rows(self, kind: str) -> list[dict[str, Any]]: ...

    def change_token(self) -> str: ...

    # harness trees
    def put_tree(self, sha: str, files: dict[str, tuple[int, bytes]]) -> None: ...

    def has_tree(self, sha: str) -> bool: ...

    def get_tree(self, sha: str) -> dict[str, tuple[int, bytes]]: ...

    def materialise_tree(self, sha: str) -> Path: ...

    # rows, for bundles and garbage collection
    def get_row(self, table: str, key: str) -> dict[str, Any] | None: ...

    def present(self, table: str, keys: list[str], column: str | None = None) -> dict[str, Any]: ...

    def transaction(self) -> contextlib.AbstractContextManager[None]: ...

    def insert_blobs(self, blobs: dict[str, bytes]) -> None: ...

    def insert_rows(self, table: str, rows: list[dict[str, Any]]) -> None: ...

    def index_rows(self, table: str, columns: str) -> list[tuple[Any, ...]]: ...

    def write_lock(self) -> contextlib.AbstractContextManager[None]: ...

    def delete_rows(self, table: str, keys: Iterable[str]) -> int: ...

    # leases: what a live writer is about to reference (gc and rm keep it, and refuse it)
    def leasing(self) -> contextlib.AbstractContextManager[None]:
        """Inside, every tree, cassette, document and blob written is leased in the same
        transaction as its write; the leases end when the outermost scope exits."""
        ...

    def lease(self, table: str, keys: Iterable[str]) -> None:
        """Lease rows of ``runs``/``cassettes``/``trees``/``blobs`` (inside ``leasing()``)."""
        ...

    def leased(self, prune: bool = False) -> dict[str, dict[str, str]]:
        """Live leases, table → {key: holder}; ``prune`` drops those of dead writers."""
        ...

    def release_leases(self) -> None: ...


class StoreBackend(BlobStore, Index, Protocol):
    """Everything replaykit asks of a store."""


__all__ = ["BlobStore", "Index", "StoreBackend"]
