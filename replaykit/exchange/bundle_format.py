"""What a replaykit bundle is: member names, the tables it carries, the error it
raises, and :class:`Selection` (the rows and blobs of one closed subset of a store).

See :mod:`replaykit.exchange.bundle` for the layout and for export/import,
:mod:`~replaykit.exchange.reader` for reading one and
:mod:`~replaykit.exchange.verifier` for what is checked.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from replaykit.cassette.store.schema import EXTRA_TABLES
from replaykit.core.errors import ReplaykitError
from replaykit.exchange.spool import Blobs

FORMAT_NAME = "replaykit-bundle"
#: the newest format: version 2 adds ``index/certificates.json`` (the forked certificates a
#: verdict excluded tasks by); a bundle without certificates is still written as version 1
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
MANIFEST = "manifest.json"
CERTIFICATES = "index/certificates.json"
TABLES = ("cassettes", "runs", "trees")
PK = {"cassettes": "id", "runs": "id", "trees": "sha"}
#: the column that says what a row *is*: equal values mean the same content
CONTENT = {"cassettes": "doc", "runs": "doc", "trees": "manifest"}
COLUMN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MEMBER_RE = re.compile(r"(manifest\.json|index/(cassettes|runs|trees|certificates)\.json|blobs/[0-9a-f]{64})")
#: the document kinds that compare harnesses (``compare``; ``transfer``: a training's harnesses on
#: other panels and models): a training's bundle carries those that measured one of its harnesses
COMPARISON_KINDS = ("compare", "transfer")
#: the columns of a certificate row (``index/certificates.json``), with their types
CERTIFICATE_COLUMNS: dict[str, type] = EXTRA_TABLES["certificates"]["columns"]


class BundleError(ReplaykitError):
    """A bundle is malformed, tampered with, unsafe, or conflicts with the target store."""


#: one column's value in an index row (what the store's tables and ``index/*.json`` hold)
Cell = str | int | float | None


class BundleRoot(TypedDict):
    """What a bundle was made of: a ``runs`` row (any kind) or a cassette."""

    table: str  # runs | cassettes
    id: str
    kind: NotRequired[str]  # the run's kind, or ``cassette``


class MemberDigest(TypedDict):
    sha256: str
    size: int


class BundleManifest(TypedDict):
    """``manifest.json``: the format, the tools that wrote it, the root, every other member's digest."""

    format: str
    version: int
    tools: dict[str, str]
    root: BundleRoot
    counts: dict[str, int]  # rows per table, and blobs
    members: dict[str, MemberDigest]


class BundleReport(TypedDict):
    """What ``cassettes export``/``import``/``verify`` report (``--json``): the bundle, its root
    and counts, then what the action did."""

    path: str
    root: BundleRoot
    counts: dict[str, int]
    # export
    bytes: NotRequired[int]
    sha256: NotRequired[str]
    images: NotRequired[list[str]]
    # import
    store: NotRequired[str]
    imported: NotRequired[dict[str, int]]
    images_loaded: NotRequired[list[str]]
    noop: NotRequired[bool]
    # verify
    ok: NotRequired[bool]
    format: NotRequired[str]
    version: NotRequired[int]
    tools: NotRequired[dict[str, str]]
    would_import: NotRequired[dict[str, int]]


@dataclass
class Selection:
    """Rows and blobs of one closed subset of a store (what a bundle holds)."""

    root: BundleRoot
    #: table -> key -> the row's columns
    rows: dict[str, dict[str, dict[str, Cell]]] = field(default_factory=lambda: {t: {} for t in TABLES})
    blobs: Blobs = field(default_factory=Blobs)  # none held in memory (exchange/spool.py)
    manifest: BundleManifest | None = None  # as read from a bundle (None: collected from a store)
    #: certificate id -> its row (``doc``: canonical JSON), those the verdicts name
    certificates: dict[str, dict[str, Cell]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        counts = {**{t: len(self.rows[t]) for t in TABLES}, "blobs": len(self.blobs)}
        if self.certificates:
            counts["certificates"] = len(self.certificates)
        return counts

    def version(self) -> int:
        """The oldest format that holds this selection."""
        return 2 if self.certificates else 1


@dataclass
class Members:
    """A bundle's members as read: the manifest and index ones in memory, blobs spooled,
    and every member's (size, sha256) as it streamed past."""

    data: dict[str, bytes] = field(default_factory=dict)
    blobs: Blobs = field(default_factory=Blobs)
    digests: dict[str, tuple[int, str]] = field(default_factory=dict)

    def __contains__(self, name: object) -> bool:
        return name in self.digests


def parse_json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise BundleError(f"{what} is not valid JSON") from None
