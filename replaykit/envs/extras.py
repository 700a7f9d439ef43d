"""What an environment kind records beside an episode's own events, and serves back.

The episode layer knows no env kind: it reaches a kind's extras only through the hooks
of its ``EnvKind`` (``base.py``: ``extras``, an ``EpisodeExtras``; ``artefacts``) and hands
them a :class:`KindStore`, the narrow part of a store they may use. The docker kind's
frozen network is one (``envs/docker/network/``): what a task container fetched is
recorded as exchanges (``cassette.events.NetEvent`` events, part of the episode's digest)
and served back, and only those, to its re-execution. The shapes here are kind-neutral:
the cassette format carries them.

- :class:`ExchangeRecord` — an exchange as an environment reports it while recording
  (:class:`NetworkedEnvironment`); :class:`StoredExchange` — as a store keeps it.
- :class:`KindStore` — blobs, the store's location, exchanges kept under a document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NotRequired, Protocol, TypedDict, runtime_checkable

from replaykit.core.records import JSON

#: what a kind's ``recording`` or ``serving`` hook gives an episode's environment (``EnvRequest.extras``)
Extras = Mapping[str, JSON]


class Exchange(TypedDict):
    """One network exchange of an episode's environment: the request as method + URL
    (credentials scrubbed) + the digest of its normalised body (never its headers or body);
    the response as status, reason, the headers kept and the sha256 and size of its body."""

    method: str
    url: str
    request_body: str
    status: int
    reason: str
    headers: Sequence[Sequence[str]]  # (lower-cased name, value) pairs
    body: str
    size: int
    source: str  # upstream (fetched) | store (served from a recording)


class ExchangeRecord(Exchange):
    """An exchange as an environment reports it while recording: its body still in a file."""

    body_path: NotRequired[str]  # the file holding the body's bytes
    spool: NotRequired[str]  # a folder to remove once every body in it is stored


class StoredExchange(Exchange):
    """An exchange as a store keeps it: its body as content-addressed chunks, in order."""

    chunks: list[str]


class Miss(TypedDict):
    """A request a re-execution's recording could not serve."""

    method: str
    url: str


class KindStore(Protocol):
    """The part of a store an env kind's extras reach (``episodes/network.py`` gives it)."""

    @property
    def location(self) -> str:
        """Where the store lives (a folder, or a server URL)."""
        ...

    @property
    def readonly(self) -> bool: ...

    def get_blob(self, digest: str) -> bytes:
        """A body chunk, verified against its address."""
        ...

    def put_exchanges(
        self, doc_id: str, kind: str, records: list[ExchangeRecord], name: str, fields: Mapping[str, JSON]
    ) -> None:
        """Keep ``records`` (their bodies streamed in) as the document ``doc_id`` of ``kind``."""
        ...

    def get_exchanges(self, doc_id: str, kind: str) -> list[StoredExchange]:
        """The exchanges of document ``doc_id`` (none when there is no such document)."""
        ...

    def get_fields(self, doc_id: str, kind: str) -> Mapping[str, JSON] | None:
        """Document ``doc_id``'s own fields, its exchanges left out (None: no such document)."""
        ...


@runtime_checkable
class NetworkedEnvironment(Protocol):
    """An environment whose network traffic is recorded (docker's frozen network)."""

    def network_exchanges(self) -> list[ExchangeRecord]:
        """The exchanges completed since the last call."""
        ...

    def network_misses(self) -> list[Miss]:
        """The requests a re-execution had no recording for."""
        ...
