"""Encode an episode into a JSON document whose large parts are blob references.

The chat history an agent re-sends each call is stored once: a list field that
extends the previous request's list keeps only the prefix length and the new
items, and each item is a content-addressed blob. ``encode`` collects the blobs it needs into a dict; the store writes them
and the document in one transaction.
"""

from __future__ import annotations

from typing import Any, Callable, cast

from replaykit.cassette.documents import (
    BodyDoc,
    EpisodeDoc,
    EventDoc,
    ListRef,
    ValueRef,
)
from replaykit.cassette.events import (
    NET_CHUNK,
    EnvEvent,
    Episode,
    ErrorEvent,
    Event,
    GradeEvent,
    LimitEvent,
    LlmEvent,
    NetEvent,
)
from replaykit.cassette.keys import CassetteKey
from replaykit.core.determinism import canonical_json, sha256_hex
from replaykit.core.meta import EpisodeMeta
from replaykit.envs.results import Grade, Observation

FORMAT = 2
#: Document formats this codec reads: 1 kept ``meta`` inline in every document; 2 stores
#: each ``meta`` field as a value reference, so the pins, versions, task and environment
#: that every episode of a panel shares are one content-addressed blob each.
READABLE_FORMATS = (1, 2)
INLINE_LIMIT = 256  # values whose canonical JSON is longer go to a blob

Blobs = dict[str, bytes]


def put(blobs: Blobs, data: bytes) -> str:
    digest = sha256_hex(data)
    blobs.setdefault(digest, data)
    return digest


def _encode_value(value: Any, blobs: Blobs) -> ValueRef:
    text = canonical_json(value)
    if len(text) <= INLINE_LIMIT:
        return {"v": value}
    return {"b": put(blobs, text.encode("utf-8"))}


def _decode_value(ref: ValueRef, get: Callable[[str], bytes]) -> Any:
    import json

    if "v" in ref:
        return ref["v"]
    return json.loads(get(ref["b"]))


def _common_prefix(items: list[Any], previous: list[Any]) -> int:
    n = 0
    for a, b in zip(items, previous, strict=False):
        if a != b:
            break
        n += 1
    return n


def encode_body(body: Any, blobs: Blobs, previous: Any = None) -> BodyDoc:
    """Encode a request body; list fields that extend the previous request's list
    (a re-sent, growing chat history) store only the prefix length and the new items."""
    if not isinstance(body, dict):
        return {"raw": _encode_value(body, blobs)}
    previous = previous if isinstance(previous, dict) else {}
    fields: dict[str, ValueRef | ListRef] = {}
    for name, value in body.items():
        if isinstance(value, list):
            before = previous.get(name)
            keep = _common_prefix(value, before) if isinstance(before, list) else 0
            ref: ListRef = {"l": [_encode_value(item, blobs) for item in value[keep:]]}
            if keep:
                ref["p"] = keep
            fields[name] = ref
        else:
            fields[name] = _encode_value(value, blobs)
    return {"fields": fields}


def decode_body(doc: BodyDoc, get: Callable[[str], bytes], previous: Any = None) -> Any:
    if "raw" in doc:
        return _decode_value(doc["raw"], get)
    body: dict[str, object] = {}
    for name, ref in doc["fields"].items():
        if "l" in ref:
            keep = ref.get("p")
            head = list(previous[name][:keep]) if keep else []
            body[name] = head + [_decode_value(item, get) for item in ref["l"]]
        else:
            body[name] = _decode_value(ref, get)
    return body


def _text(value: str, blobs: Blobs) -> ValueRef:
    if len(value) <= INLINE_LIMIT:
        return {"v": value}
    return {"b": put(blobs, value.encode("utf-8"))}


def _untext(ref: ValueRef, get: Callable[[str], bytes]) -> str:
    return str(ref["v"]) if "v" in ref else get(ref["b"]).decode("utf-8")


def encode_event(event: Event, blobs: Blobs, previous: Any = None) -> EventDoc:
    if isinstance(event, LlmEvent):
        return {
            "kind": "llm",
            "method": event.method,
            "path": event.path,
            "body": encode_body(event.body, blobs, previous),
            "status": event.status,
            "reason": event.reason,
            "headers": [list(h) for h in event.headers],
            "content": put(blobs, event.content),
            "chunks": event.chunks,
        }
    if isinstance(event, EnvEvent):
        obs = event.observation
        snapshot = put(blobs, event.snapshot_data) if event.snapshot_data is not None else event.snapshot
        return {
            "kind": "env",
            "action": _text(event.action, blobs),
            "stdout": _text(obs.stdout, blobs),
            "stderr": _text(obs.stderr, blobs),
            "exit_code": obs.exit_code,
            "timed_out": obs.timed_out,
            "state": event.state_digest,
            "snapshot": snapshot,
        }
    if isinstance(event, NetEvent):
        chunks = event.chunks
        if event.size and not chunks:  # not streamed into the store beforehand: read it now
            chunks = _file_chunks(event, blobs)
        return {
            "kind": "net",
            "method": event.method,
            "url": event.url,
            "request_body": event.request_body,
            "status": event.status,
            "reason": event.reason,
            "headers": [list(h) for h in event.headers],
            "body": event.body,
            "size": event.size,
            "chunks": list(chunks),
            "source": event.source,
        }
    if isinstance(event, ErrorEvent):
        return {"kind": "error", "message": event.message}
    if isinstance(event, LimitEvent):
        return {"kind": "limit", "limit": event.limit, "value": event.value, "message": event.message}
    if isinstance(event, GradeEvent):
        grade = event.grade
        return {
            "kind": "grade",
            "grade": grade.to_dict(),
        }
    raise TypeError(f"unknown event {event!r}")


def _file_chunks(event: NetEvent, blobs: Blobs) -> list[str]:
    if not event.body_path:
        raise ValueError(f"network event {event.method} {event.url} has neither chunks nor a body file")
    out = []
    with open(event.body_path, "rb") as body:
        while piece := body.read(NET_CHUNK):
            out.append(put(blobs, piece))
    return out


def decode_event(doc: EventDoc, get: Callable[[str], bytes], previous: Any = None) -> Event:
    if doc["kind"] == "llm":
        return LlmEvent(
            method=doc["method"],
            path=doc["path"],
            body=decode_body(doc["body"], get, previous),
            status=doc["status"],
            reason=doc["reason"],
            headers=[(h[0], h[1]) for h in doc["headers"]],
            content=get(doc["content"]),
            chunks=list(doc["chunks"]),
        )
    if doc["kind"] == "env":
        return EnvEvent(
            action=_untext(doc["action"], get),
            observation=Observation(
                stdout=_untext(doc["stdout"], get),
                stderr=_untext(doc["stderr"], get),
                exit_code=doc["exit_code"],
                timed_out=doc["timed_out"],
            ),
            state_digest=doc["state"],
            snapshot=doc.get("snapshot"),
        )
    if doc["kind"] == "net":
        return NetEvent(
            method=doc["method"],
            url=doc["url"],
            request_body=doc["request_body"],
            status=int(doc["status"]),
            reason=doc.get("reason", ""),
            headers=[(h[0], h[1]) for h in doc["headers"]],
            body=doc["body"],
            size=int(doc["size"]),
            chunks=list(doc["chunks"]),
            source=doc.get("source", "upstream"),
        )
    if doc["kind"] == "error":
        return ErrorEvent(message=doc["message"])
    if doc["kind"] == "limit":
        return LimitEvent(limit=str(doc["limit"]), value=doc["value"], message=str(doc["message"]))
    if doc["kind"] == "grade":
        return GradeEvent(grade=Grade.from_dict(doc["grade"]))
    raise ValueError(f"unknown event kind {doc['kind']!r}")


def encode_episode(episode: Episode, blobs: Blobs) -> EpisodeDoc:
    return {
        "format": FORMAT,
        "key": episode.key.canonical(),
        "meta": {name: _encode_value(value, blobs) for name, value in episode.meta.items()},
        "events": encode_events(episode.events, blobs),
    }


def encode_events(events: list[Event], blobs: Blobs) -> list[EventDoc]:
    """Each request body is delta-encoded against the previous request to the same path."""
    out: list[EventDoc] = []
    previous: dict[str, object] = {}  # path → the last request body sent to it
    for event in events:
        prev = previous.get(event.path) if isinstance(event, LlmEvent) else None
        out.append(encode_event(event, blobs, prev))
        if isinstance(event, LlmEvent):
            previous[event.path] = event.body
    return out


def decode_events(docs: list[EventDoc], get: Callable[[str], bytes]) -> list[Event]:
    out: list[Event] = []
    previous: dict[str, object] = {}  # path → the last request body sent to it
    for doc in docs:
        event = decode_event(doc, get, previous.get(doc["path"]) if doc["kind"] == "llm" else None)
        if isinstance(event, LlmEvent):
            previous[event.path] = event.body
        out.append(event)
    return out


def decode_episode(doc: EpisodeDoc, get: Callable[[str], bytes]) -> Episode:
    fmt = doc.get("format")
    if fmt not in READABLE_FORMATS:
        raise ValueError(f"unknown cassette format {fmt!r}")
    meta = doc.get("meta", {})
    values = {name: _decode_value(ref, get) for name, ref in meta.items()} if fmt >= 2 else meta
    return Episode(
        key=CassetteKey.from_canonical(doc["key"]),
        events=decode_events(doc["events"], get),
        meta=cast(EpisodeMeta, values),  # as it was written (the document is verified by its digest)
    )
