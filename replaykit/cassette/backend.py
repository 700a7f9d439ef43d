"""What a store provides, by role: the protocols the rest of replaykit is written against.

A consumer asks for the role it uses: ``EpisodeStore`` (episodes and harness trees, found by
key), ``DocumentStore`` (runs, trainings, verdicts, ... and certificates), ``BlobStore``
(content-addressed bytes), ``ListingStore`` (browsing: listings, pages, filter values, a change
token), ``MaintenanceStore`` (rows for bundles and ``gc``, leases, disk space); each is a
``StoreHandle`` (where the store is, its errors). ``RunStore`` is what measuring, replaying and
judging runs use (episodes, documents, blobs); ``StoreBackend`` is all of them, what
:func:`replaykit.cassette.stores.open_store` returns (the one place a concrete store is built).
``Store`` (the ``store`` package) implements it once, over the narrow driver a backend provides
(:class:`~replaykit.cassette.store.driver.StoreDriver`: SQLite, PostgreSQL, a plugin's);
``mypy`` checks that it conforms. Every read is verified:
a blob against its content address, a document against its row, a cassette row against
its events (damage raises ``StoreCorrupt``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from replaykit.core.errors import StoreCorrupt

if TYPE_CHECKING:  # the protocols name these; a listing loads none of them
    from replaykit.cassette.certificates import Certificate
    from replaykit.cassette.events import Episode
    from replaykit.cassette.keys import CassetteKey
    from replaykit.cassette.lineage import ReuseCounts
    from replaykit.cassette.store.browsing import EpisodeFacets, EpisodeFilters, EpisodeListing
    from replaykit.cassette.store.schema import (
        CassetteColumns,
        CassetteRow,
        Cell,
        RunsRow,
    )
    from replaykit.cassette.store.tasks import TaskRates
    from replaykit.core.records import JSON
    from replaykit.core.run_doc import RunDoc  # a run's model loads pydantic: only for who reads runs
    from replaykit.core.training_doc import TrainingDoc


class StoreHandle(Protocol):
    """A store as a place: where it is, whether it can be written, its errors. Every role has it."""

    readonly: bool

    @property
    def location(self) -> str:
        """What ``open_store`` reopens the store from; what messages name (no password)."""
        ...

    def reopen(self, readonly: bool | None = None) -> StoreBackend:
        """A new connection to the same store (another thread, another process's view)."""
        ...

    def exists(self) -> bool: ...

    def corrupt(self, what: str, where: str = "") -> StoreCorrupt:
        """The ``store corrupt: …`` error naming this store (raise it on damage)."""
        ...

    def close(self) -> None: ...


class BlobStore(StoreHandle, Protocol):
    """Content-addressed bytes: the key is the sha256 of the data."""

    def put_blob(self, data: bytes) -> str: ...

    def get_blob(self, digest: str) -> bytes: ...

    def has_blob(self, digest: str) -> bool: ...

    def put_json(self, value: Any) -> str:
        """A JSON value as a blob (canonical JSON), by its hash."""
        ...

    def get_json(self, digest: str) -> Any:
        """A JSON blob decoded, verified like ``get_blob``."""
        ...

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """Many blobs at once (a query, not one per blob), each verified like ``get_blob``."""
        ...


class EpisodeStore(StoreHandle, Protocol):
    """Episodes (cassettes) and the harness trees they ran: written, read verified, found by key."""

    def put_episode(self, episode: Episode) -> None: ...

    def get_episode(self, cassette_id: str) -> Episode: ...

    def has(self, cassette_id: str) -> bool: ...

    def cassette_row(self, cassette_id: str) -> CassetteRow: ...

    def verified_columns(self, cassette_id: str) -> CassetteColumns:
        """A cassette's derived columns, checked against its events."""
        ...

    def verified_reuse(self, cassette_id: str) -> ReuseCounts:
        """What a cassette's reuse claim counts, checked against its own events."""
        ...

    def find_proxy_sessions(self, name: str, endpoint: str | None = None) -> list[CassetteRow]: ...

    def find_donors(self, key: CassetteKey, limit: int = 32) -> list[CassetteRow]: ...

    def find_keyed(self, key: CassetteKey) -> list[CassetteRow]: ...

    def find_forks(self, parent: CassetteKey) -> list[CassetteRow]: ...

    def put_tree(self, sha: str, files: dict[str, tuple[int, bytes]]) -> None: ...

    def has_tree(self, sha: str) -> bool: ...

    def get_tree(self, sha: str) -> dict[str, tuple[int, bytes]]: ...

    def materialise_tree(self, sha: str, files: dict[str, tuple[int, bytes]] | None = None) -> Path: ...


class DocumentStore(StoreHandle, Protocol):
    """Documents (runs, trainings, verdicts, compare results, ...) and certificates, read verified
    against their rows."""

    def put_doc(self, doc_id: str, kind: str, doc: Mapping[str, object], **columns: str) -> None: ...

    def put_run(self, run: RunDoc) -> None: ...

    def has_doc(self, doc_id: str, doc_digest: str) -> bool:
        """Is ``doc_id`` stored with exactly the document hashing to ``doc_digest``?"""
        ...

    def get_doc(self, doc_id: str, kind: str | None = None) -> Mapping[str, object]:
        """A document by id or unique prefix (of ``kind``, when given), verified against its row."""
        ...

    def verified_doc(self, row: Mapping[str, object], data: bytes | None = None) -> dict[str, JSON]:
        """A runs-table row's document, its blob verified and its id checked against the row
        (``data``: the blob's bytes as ``doc_version`` read them with the row)."""
        ...

    def doc_version(self, doc_id: str) -> tuple[RunsRow, bytes]:
        """A document's row (by full id) and its blob's verified bytes, as of one version
        (a document replaced while it is read is read at its new version)."""
        ...

    def get_run(self, run_id: str) -> RunDoc: ...

    def get_training(self, training_id: str) -> TrainingDoc:
        """A training by id or unique prefix, read into its model (not recomputed)."""
        ...

    def doc_kind(self, doc_id: str) -> str: ...

    def resolve_id(self, table: str, prefix: str, what: str, column: str = "id") -> str: ...

    def check_run(self, run: RunDoc) -> None:
        """Every episode entry of a run document against its cassette's events."""
        ...

    def find_trainings(self, spec_digest: str) -> list[TrainingDoc]: ...

    def get_certificate(self, cert_id: str) -> Certificate | None: ...

    def put_certificate(self, cert: Certificate) -> None: ...


class ListingStore(StoreHandle, Protocol):
    """Browsing: listings of episodes and documents (index rows, bodies not read), pages, filter
    values, a change token."""

    def cassette_summaries(self, limit: int | None = None) -> list[CassetteRow]:
        """Index rows of the newest ``limit`` cassettes, oldest first (documents not read)."""
        ...

    def newest_cassettes(self, limit: int, offset: int = 0) -> list[CassetteRow]:
        """Index rows newest first: ``limit`` of them after the newest ``offset`` (what changed
        since a reader's last look is at the front)."""
        ...

    def count_cassettes(self) -> int: ...

    def list_runs(self) -> list[RunsRow]: ...

    def doc_rows(self, kind: str) -> list[RunsRow]: ...

    def episode_page(
        self,
        filters: EpisodeFilters | None = None,
        sort: str = "created_at",
        descending: bool = True,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[EpisodeListing], int]: ...

    def episode_facets(self, kind: str = "episode", limit: int = 100) -> EpisodeFacets:
        """The first ``limit`` distinct values of each filter column, kept until the store changes."""
        ...

    def task_rates(self, model: str = "", harness: str = "") -> TaskRates:
        """Per task across the measured runs (``store/tasks.py``), kept per change to the store."""
        ...

    def change_token(self) -> str: ...


class MaintenanceStore(StoreHandle, Protocol):
    """Rows as stored, for bundles and garbage collection; leases; disk space."""

    def get_row(self, table: str, key: str) -> dict[str, Cell] | None: ...

    def present(self, table: str, keys: list[str], column: str | None = None) -> dict[str, Cell]: ...

    def transaction(self) -> contextlib.AbstractContextManager[None]: ...

    def insert_blobs(self, blobs: dict[str, bytes]) -> None: ...

    def insert_rows(self, table: str, rows: list[dict[str, Cell]]) -> None: ...

    def index_rows(self, table: str, columns: str) -> list[tuple[Any, ...]]: ...

    def write_lock(self) -> contextlib.AbstractContextManager[None]: ...

    def delete_rows(self, table: str, keys: Iterable[str]) -> int: ...

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

    def room_to_remove(self) -> contextlib.AbstractContextManager[None]: ...

    def compact(self) -> dict[str, object]: ...


class RunStore(EpisodeStore, DocumentStore, BlobStore, Protocol):
    """What measuring, replaying and judging runs use: their documents, episodes, trees and blobs."""


class BrowseStore(RunStore, ListingStore, Protocol):
    """What showing a store uses (the viewer, reports, listings): runs and their listings, no rows."""


class StoreBackend(BrowseStore, MaintenanceStore, Protocol):
    """Everything replaykit asks of a store (what ``open_store`` returns; ``Store`` implements it)."""


__all__ = [
    "BlobStore",
    "BrowseStore",
    "DocumentStore",
    "EpisodeStore",
    "ListingStore",
    "MaintenanceStore",
    "RunStore",
    "StoreBackend",
    "StoreHandle",
]
