"""The store's side of the frozen network (``replaykit/envs/docker/network/`` runs the proxy).

Recording: the proxy leaves each response body in its spool; :func:`store_bodies` streams
it into the store as content-addressed chunks (``NET_CHUNK`` bytes each: memory stays
bounded, and a wheel fetched by a hundred episodes is stored once) before the episode is
written. Re-executing: :func:`serve_folder` writes a recording's exchanges back as the
proxy's ``index.json`` + ``bodies/``, chunk by chunk, so the proxy serves exactly those.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypedDict

from replaykit.cassette.backend import BlobStore
from replaykit.cassette.codec import decode_event, encode_event
from replaykit.cassette.events import NET_CHUNK, Episode, NetEvent
from replaykit.core.errors import CassetteNotFound, EnvError
from replaykit.envs.docker.network import NetworkRequest
from replaykit.envs.docker.network.matching import ExchangeRecord, MissRecord, ServedResponse, key_of


def ca_home(store: Any) -> Path:
    """Where the store's CA lives: the store folder; a server store (PostgreSQL) has none, so
    its CA is kept on this machine, under ``~/.cache/replaykit/network-ca/<its location's hash>``
    (a secret never goes into the database: bundles are made from it)."""
    location = str(store.location)
    if "://" not in location:
        return Path(location)
    digest = hashlib.sha256(location.encode()).hexdigest()[:16]
    return Path.home() / ".cache" / "replaykit" / "network-ca" / digest


def network_mode(episode: Episode) -> str:
    """How the episode's container reached the network: ``frozen``, ``live`` or ``none``."""
    environment = episode.meta.get("environment") or {}
    state = environment.get("network")
    if state in ("frozen", "none"):
        return str(state)
    if state == "unfrozen":
        return "live"
    limits = environment.get("limits")
    if not isinstance(limits, Mapping):
        limits = {}
    mode = limits.get("network_mode")
    if mode:
        return str(mode)
    return "live" if limits.get("network") else "none"  # recorded before the frozen network


def store_bodies(store: BlobStore, episode: Episode) -> None:
    """Stream every recorded network body of ``episode`` into the store; the spool is removed."""
    store_event_bodies(store, episode.net_events)


def store_event_bodies(store: BlobStore, events: list[NetEvent]) -> None:
    """Stream each event's spooled body into the store as chunks; the spools are removed."""
    spools: set[Path] = set()
    for event in events:
        if event.chunks or not event.body_path:
            continue
        path = Path(event.body_path)
        spools.add(path.parent.parent)
        whole, chunks = hashlib.sha256(), []
        try:
            with open(path, "rb") as body:
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


def serve_folder(store: BlobStore, events: list[NetEvent], folder: Path) -> Path:
    """``folder`` holding ``events`` as the proxy serves them (the first recording of a key wins)."""
    bodies = folder / "bodies"
    bodies.mkdir(parents=True, exist_ok=True)
    index: dict[str, ServedResponse] = {}
    for event in events:
        key = key_of(event.method, event.url, event.request_body)
        if key in index:
            continue
        index[key] = {
            "status": event.status,
            "reason": event.reason,
            "headers": event.headers,
            "body": event.body,
            "size": event.size,
        }
        target = bodies / event.body
        if not target.exists():
            with open(target, "wb") as out:
                for chunk in event.chunks:
                    out.write(store.get_blob(chunk))  # verified against its address
    (folder / "index.json").write_text(json.dumps(index, sort_keys=True))
    return folder


def replay_request(store: Any, episode: Episode) -> tuple[NetworkRequest, Path | None]:
    """What a re-execution of ``episode`` gives its environment: the store (for the CA) and,
    for a frozen recording, a folder serving its exchanges only (the caller removes it)."""
    mode = network_mode(episode)
    if mode == "none":
        return {}, None
    from replaykit.envs.docker.network.ca import ensure_ca

    home = ca_home(store)
    ensure_ca(home)  # a store that imported the recording makes its own CA
    request: NetworkRequest = {"store": str(home)}
    if mode != "frozen":
        return request, None
    folder = Path(tempfile.mkdtemp(prefix="replaykit-net-serve-"))
    serve_folder(store, episode.net_events, folder)
    return {**request, "serve": str(folder), "serve_only": True}, folder


def unrecorded_line(misses: list[MissRecord]) -> str:
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
    """``net ls``: one exchange of a task image's build."""

    image: str


class ExchangeRow(Exchange):
    """``net ls``: one exchange of an episode."""

    cassette_id: str
    task_id: str
    seed: int


def _exchange(position: int, event: NetEvent) -> Exchange:
    return {
        "position": position,
        "method": event.method,
        "url": event.url,
        "status": event.status,
        "bytes": event.size,
        "source": event.source,
        "body": event.body,
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


def net_listing(store: Any, target: str) -> NetListing:
    """What the episodes of a run (or one cassette) fetched: one row per exchange, and totals."""
    try:
        ident = store.resolve_id("runs", target, what="run")
        kind, cassettes = "run", list(store.get_run(ident).cassettes)
    except CassetteNotFound:  # not a run: a cassette (its error names both when it is neither)
        ident = store.resolve_id("cassettes", target, what="run or cassette")
        kind, cassettes = "cassette", [ident]
    rows: list[ExchangeRow] = []
    bodies: dict[str, int] = {}
    images: dict[str, None] = {}
    for cassette_id in cassettes:
        episode = store.get_episode(cassette_id)
        image = dict(episode.key.extra).get("image")
        if image:
            images.setdefault(image, None)
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
    for image in images:
        for position, event in enumerate(image_exchanges(store, image)):
            bodies[event.body] = event.size
            builds.append({"image": image, **_exchange(position, event)})
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


IMAGE_KIND = "network-image"


def image_doc_id(image_id: str) -> str:
    return "net-image-" + image_id.removeprefix("sha256:")[:32]


@contextlib.contextmanager
def recording_builds(store: Any, uses_docker: bool, setting: str | None) -> Iterator[None]:
    """Inside: a task image built from scratch has its HTTP fetches recorded for that image
    (a ``network-image`` document: its exchanges, their body chunks under ``blobs``)."""
    if store is None or not uses_docker or setting in ("live", "none") or getattr(store, "readonly", False):
        yield
        return
    from replaykit.envs.docker.network import build
    from replaykit.envs.docker.network.ca import ensure_ca

    home = ca_home(store)
    ensure_ca(home)

    def keep(image_id: str, records: list[ExchangeRecord], spool: Path) -> None:
        events = [NetEvent.from_record(r, str(spool)) for r in records]
        store_event_bodies(store, events)
        blobs: dict[str, bytes] = {}
        doc = {
            "kind": IMAGE_KIND,
            "image": image_id,
            "exchanges": [encode_event(e, blobs) for e in events],
            "blobs": sorted({c for e in events for c in e.chunks}),
        }
        store.put_doc(image_doc_id(image_id), IMAGE_KIND, doc, name=image_id)

    with build.recording(home, keep):
        yield


def image_exchanges(store: Any, image_id: str) -> list[NetEvent]:
    """What the build of ``image_id`` fetched, when it was recorded (else nothing)."""
    try:
        doc = store.get_doc(image_doc_id(image_id), IMAGE_KIND)
    except CassetteNotFound:
        return []
    events = [decode_event(item, store.get_blob) for item in doc.get("exchanges") or []]
    return [e for e in events if isinstance(e, NetEvent)]
