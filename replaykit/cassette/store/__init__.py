"""The cassette store: content-addressed blobs and an index of episodes, documents and
harness trees, written once over a narrow driver (``driver.py``) that a backend implements.

A store location is a folder (SQLite, the default: ``sqlite.py``; layout below) or a URL
(``postgresql://…``: ``postgres.py``; a plugin's scheme: ``stores.register_store``)::

    index.db   tables: cassettes, runs, trees, blobs (+ certificates, leases)
    cache/     materialised harness trees (safe to delete)

Every write of an episode (its blobs, its document, its index row) is one transaction, so
a process killed mid-record leaves a readable store and never a half cassette. Look-ups
are by key: no scan of a whole cassette.

Every read is verified (:mod:`~replaykit.cassette.integrity`): a blob against its
content address, a document against its row's id, a cassette row's cached columns
against its events. Damage raises :class:`~replaykit.core.errors.StoreCorrupt`.
``Store(root, readonly=True)`` (replay, audit, listings, export) refuses a missing
store instead of creating one, cannot write, and materialises harness trees in a
temporary folder, so the store stays byte-identical.

The store package is the only one that speaks SQL. ``Store`` is composed of one part per
concern: ``base`` (its driver, transactions, disk space), ``blobs``, ``episodes``,
``documents``, ``queries`` (named look-ups other layers ask), ``browsing`` (pages of
episodes and documents for the viewer; ``search`` is its full-text sidecar file, ``tasks``
its per-task rates, kept per change to the store), ``rows``
(bundles and ``gc``), ``trees``, ``leases`` (what live writers are about to reference);
``schema`` holds the tables and row shapes, ``sql`` the SQL both SQL drivers share,
``guard`` turns every SQLite failure into one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from replaykit.cassette.store.browsing import BrowsingMixin
from replaykit.cassette.store.documents import DocumentsMixin
from replaykit.cassette.store.episodes import EpisodesMixin
from replaykit.cassette.store.queries import QueriesMixin
from replaykit.cassette.store.rows import RowsMixin
from replaykit.cassette.store.tasks import TasksMixin
from replaykit.cassette.store.trees import TreesMixin

if TYPE_CHECKING:
    from replaykit.cassette.backend import StoreBackend


class Store(EpisodesMixin, QueriesMixin, TasksMixin, DocumentsMixin, BrowsingMixin, RowsMixin, TreesMixin):
    """The store over its driver: ``Store(folder)`` (SQLite) or ``Store(driver)``. Opened
    lazily; writers take turns (one write transaction at a time).

    Everything else asks through the methods :class:`replaykit.cassette.backend.StoreBackend`
    lists (named queries: ``find_trainings``, ``find_proxy_sessions``, certificates, bundle
    rows, ...); a backend implements only :class:`~replaykit.cassette.store.driver.StoreDriver`.
    """


def open_sqlite(location: str, readonly: bool = False) -> Store:
    """The ``sqlite`` store backend (``replaykit.cassette.stores``): a folder holding ``index.db``."""
    return Store(Path(location).expanduser(), readonly=readonly)


__all__ = ["Store", "open_sqlite"]

if TYPE_CHECKING:
    _conforms: type[StoreBackend] = Store  # mypy: Store implements the backend protocol
