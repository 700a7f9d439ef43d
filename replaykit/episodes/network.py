"""The store's side of what an environment fetched (``net`` events), for any env kind.

An env kind records and serves its episodes' network exchanges through its own hooks
(``EnvKind.extras``; the docker kind's frozen network is ``envs/docker/network/``); this
module gives those hooks the narrow store they may use (:class:`KindStoreView`, a
``envs.extras.KindStore``) and does the kind-neutral rest. Recording: an exchange's body
waits in a file until :func:`store_bodies` streams it into the store as content-addressed
chunks (``NET_CHUNK`` bytes each: memory stays bounded, and a wheel fetched by a hundred
episodes is stored once) before the episode is written. ``net ls`` is :func:`net_listing`.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, cast

from replaykit.cassette.backend import BlobStore, RunStore
from replaykit.cassette.codec import decode_event, encode_event
from replaykit.cassette.events import NET_CHUNK, Episode, NetEvent
from replaykit.core.errors import CassetteNotFound, EnvError
from replaykit.core.records import JSON
from replaykit.envs.extras import ExchangeRecord, Extras, Miss, StoredExchange

if TYPE_CHECKING:
    from replaykit.envs.base import EnvKind, EnvSection, EpisodeExtras, S
    from replaykit.envs.tasks import Task


class KindStoreView:
    """The part of a store an env kind's extras reach (``envs.extras.KindStore``)."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    @property
    def location(self) -> str:
        return self._store.location

    @property
    def readonly(self) -> bool:
        return bool(getattr(self._store, "readonly", False))

    def get_blob(self, digest: str) -> bytes:
        return self._store.get_blob(digest)

    def put_exchanges(
        self, doc_id: str, kind: str, records: list[ExchangeRecord], name: str, fields: Mapping[str, JSON]
    ) -> None:
        events = [NetEvent.from_record(r) for r in records]
        store_event_bodies(self._store, events)
        blobs: dict[str, bytes] = {}
        doc = {
            "kind": kind,
            **fields,
            "exchanges": [encode_event(e, blobs) for e in events],
            "blobs": sorted({c for e in events for c in e.chunks}),
        }
        self._store.put_doc(doc_id, kind, doc, name=name)

    def get_fields(self, doc_id: str, kind: str) -> Mapping[str, JSON] | None:
        try:
            doc = self._store.get_doc(doc_id, kind)
        except CassetteNotFound:
            return None
        return {k: cast(JSON, v) for k, v in doc.items() if k not in ("exchanges", "blobs")}

    def get_exchanges(self, doc_id: str, kind: str) -> list[StoredExchange]:
        try:
            doc = self._store.get_doc(doc_id, kind)
        except CassetteNotFound:
            return []
        items: Any = doc.get("exchanges") or []
        events = [decode_event(item, self._store.get_blob) for item in items]
        return [e.stored() for e in events if isinstance(e, NetEvent)]


def extras_of(
    extra: Sequence[tuple[str, str]], environment: Mapping[str, object] | None = None
) -> EpisodeExtras | None:
    """The extras hooks of the env kind a cassette key names (else its recorded environment
    metadata: keys made before the kind was in them); None: it has none, or that kind is not
    installed here (its environment cannot be built either)."""
    from replaykit.envs.registry import get_env_kind  # the kinds (and pydantic) only when asked

    kind = dict(extra).get("env") or str((environment or {}).get("kind") or "local")
    try:
        return get_env_kind(kind).extras
    except EnvError:
        return None


@contextlib.contextmanager
def recording(
    store: RunStore | None, kind: EnvKind[S], env: EnvSection, tasks: Sequence[Task]
) -> Iterator[Extras]:
    """Around a run's keys and recordings: the kind's extras recorder (``{}``: none, or no
    store to keep what it records in)."""
    if store is None or kind.extras is None:
        yield {}
        return
    with kind.extras.recording(KindStoreView(store), kind.section(env), tasks) as extras:
        yield extras


@contextlib.contextmanager
def serving(store: RunStore, episodes: list[Episode]) -> Iterator[dict[str, Extras]]:
    """Each episode's extras for a re-execution (its recorded exchanges only), removed after."""
    view = KindStoreView(store)
    with contextlib.ExitStack() as stack:
        served: dict[str, Extras] = {}
        for episode in episodes:
            environment = episode.meta.get("environment") or {}
            hooks = extras_of(episode.key.extra, environment)
            if hooks is None:
                served[episode.id] = {}
                continue
            exchanges = [e.stored() for e in episode.net_events]
            served[episode.id] = stack.enter_context(hooks.serving(view, environment, exchanges))
        yield served


def store_bodies(store: BlobStore, episode: Episode) -> None:
    """Stream every recorded network body of ``episode`` into the store; its spools are removed."""
    store_event_bodies(store, episode.net_events)


def store_event_bodies(store: BlobStore, events: list[NetEvent]) -> None:
    """Stream each event's body file into the store as chunks; the spools are removed."""
    spools: set[str] = set()
    for event in events:
        if event.spool:
            spools.add(event.spool)
        if event.chunks or not event.body_path:
            continue
        whole, chunks = hashlib.sha256(), []
        try:
            with open(event.body_path, "rb") as body:
                while piece := body.read(NET_CHUNK):
                    whole.update(piece)
                    chunks.append(store.put_blob(piece))
        except OSError as exc:
            raise EnvError(
                f"the body of {event.method} {event.url} is missing from the proxy's spool: {exc}"
            ) from None
        if whole.hexdigest() != event.body:
            raise EnvError(f"the body of {event.method} {event.url} changed in the proxy's spool; re-record")
        event.chunks = chunks
        event.body_path = None
    for spool in spools:
        shutil.rmtree(spool, ignore_errors=True)
    for event in events:
        event.spool = None


def unrecorded_line(misses: list[Miss]) -> str:
    first = misses[0]
    more = f" (and {len(misses) - 1} more)" if len(misses) > 1 else ""
    return (
        f"unrecorded request {first['method']} {first['url']}{more}: the frozen network serves only "
        "what the recording fetched; re-record the run (replaykit run --record-mode all)"
    )


class Exchange(TypedDict):
    """``net ls``: one recorded exchange, at its position in the episode or the build."""

    position: int
    method: str
    url: str
    status: int
    bytes: int
    source: str  # upstream (fetched) | store (served)
    body: str


class BuildExchangeRow(Exchange):
    """``net ls``: one exchange of a build (a task image's)."""

    image: str


class ExchangeRow(Exchange):
    """``net ls``: one exchange of an episode."""

    cassette_id: str
    task_id: str
    seed: int


def _exchange(position: int, event: NetEvent | StoredExchange) -> Exchange:
    if isinstance(event, NetEvent):
        event = event.stored()
    return {
        "position": position,
        "method": event["method"],
        "url": event["url"],
        "status": event["status"],
        "bytes": event["size"],
        "source": event["source"],
        "body": event["body"],
    }


class NetListing(TypedDict):
    """``net ls --json``: what a run's (or a cassette's) episodes fetched, and totals."""

    image_builds: list[BuildExchangeRow]
    kind: str  # run | cassette
    id: str
    exchanges: list[ExchangeRow]
    total: int
    misses: int
    hits: int
    bytes: int
    stored_bytes: int  # the distinct bodies' bytes


def net_listing(store: RunStore, target: str) -> NetListing:
    """What the episodes of a run (or one cassette) fetched: one row per exchange, and totals."""
    try:
        ident = store.resolve_id("runs", target, what="run")
        kind, cassettes = "run", list(store.get_run(ident).cassettes)
    except CassetteNotFound:  # not a run: a cassette (its error names both when it is neither)
        ident = store.resolve_id("cassettes", target, what="run or cassette")
        kind, cassettes = "cassette", [ident]
    rows: list[ExchangeRow] = []
    bodies: dict[str, int] = {}
    extras: dict[tuple[tuple[str, str], ...], None] = {}
    for cassette_id in cassettes:
        episode = store.get_episode(cassette_id)
        extras.setdefault(tuple(episode.key.extra), None)
        for position, event in enumerate(episode.events):
            if isinstance(event, NetEvent):
                bodies[event.body] = event.size
                rows.append(
                    {
                        "cassette_id": cassette_id,
                        "task_id": episode.key.task_id,
                        "seed": episode.key.seed,
                        **_exchange(position, event),
                    }
                )
    builds: list[BuildExchangeRow] = []
    for built, exchanges in _builds(store, list(extras)):
        for position, exchange in enumerate(exchanges):
            bodies[exchange["body"]] = exchange["size"]
            builds.append({"image": built, **_exchange(position, exchange)})
    return {
        "image_builds": builds,
        "kind": kind,
        "id": ident,
        "exchanges": rows,
        "total": len(rows),
        "misses": sum(1 for r in rows if r["source"] == "upstream"),
        "hits": sum(1 for r in rows if r["source"] == "store"),
        "bytes": sum(r["bytes"] for r in rows),
        "stored_bytes": sum(bodies.values()),
    }


def _builds(
    store: RunStore, keys: list[tuple[tuple[str, str], ...]]
) -> list[tuple[str, list[StoredExchange]]]:
    """What the builds behind these cassette keys fetched, each build once, in key order."""
    view = KindStoreView(store)
    found: dict[str, list[StoredExchange]] = {}
    for extra in keys:
        hooks = extras_of(extra)
        for built, exchanges in hooks.build_exchanges(view, extra) if hooks else []:
            found.setdefault(built, exchanges)
    return list(found.items())
