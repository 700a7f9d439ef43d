"""The cassette store: a sqlite-utils index plus content-addressed blobs, in one file.

Layout of a store folder (default ``./cassettes``)::

    index.db   tables: cassettes, runs, trees, blobs (+ trainings, verdicts, ...)
    cache/     materialised harness trees (safe to delete)

Every write of an episode (its blobs, its document, its index row) is one SQLite
transaction, so a process killed mid-record leaves a readable store and never a
half cassette. Look-ups are by key: no scan of a whole cassette.

Every read is verified (:mod:`~replaykit.cassette.integrity`): a blob against its
content address, a document against its row's id, a cassette row's cached columns
against its events. Damage raises :class:`~replaykit.core.errors.StoreCorrupt`.
``Store(root, readonly=True)`` (replay, audit, listings, export) refuses a missing
store instead of creating one, cannot write (``PRAGMA query_only``) and
materialises harness trees in a temporary folder, so the store stays byte-identical.

The store is the only package that speaks SQL. ``Store`` is composed of one part
per concern: ``base`` (opening, plumbing), ``blobs``, ``episodes``, ``documents``,
``queries`` (named look-ups other layers ask), ``browsing`` (pages of episodes and
documents for the viewer; ``search`` is its full-text sidecar file), ``rows`` (bundles and ``gc``),
``trees``, ``leases`` (what live writers are about to reference), ``space`` (the reserve
that lets ``gc`` run on a full disk; compaction); ``guard`` turns every SQLite failure
into one line; ``schema`` holds the tables, views and row shapes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from replaykit.cassette.store.browsing import BrowsingMixin
from replaykit.cassette.store.documents import DocumentsMixin
from replaykit.cassette.store.episodes import EpisodesMixin
from replaykit.cassette.store.queries import QueriesMixin
from replaykit.cassette.store.rows import RowsMixin
from replaykit.cassette.store.space import SpaceMixin
from replaykit.cassette.store.trees import TreesMixin

if TYPE_CHECKING:
    from replaykit.cassette.backend import StoreBackend


class Store(EpisodesMixin, DocumentsMixin, QueriesMixin, BrowsingMixin, RowsMixin, TreesMixin, SpaceMixin):
    """A folder holding ``index.db``. Opened lazily; safe for one writer at a time.

    The only package that speaks SQL: everything else asks through the named queries
    below (``find_trainings``, ``find_proxy_sessions``, certificates, bundle rows, ...);
    :class:`replaykit.cassette.backend.StoreBackend` lists what a second backend provides.
    """


def open_sqlite(location: str, readonly: bool = False) -> Store:
    """The ``sqlite`` store backend (``replaykit.cassette.stores``): a folder holding ``index.db``."""
    return Store(Path(location).expanduser(), readonly=readonly)


__all__ = ["Store", "open_sqlite"]

if TYPE_CHECKING:
    _conforms: type[StoreBackend] = Store  # mypy: Store implements the backend protocol
