"""The events of one episode, in order, and the episode digest.

An episode is a list of events: ``llm`` (request → exact response bytes with their
chunking), ``env`` (action → observation + state digest), ``net`` (what the
environment fetched, as its env kind recorded it), ``error`` (the harness raised), ``limit``
(the framework refused a call past a limit) and a final ``grade``. The digest is sha256 over the canonical stream of their digest forms —
never wall-clock times — and equal digests are what "bit-for-bit" means.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from replaykit.cassette.keys import CassetteKey
from replaykit.core.determinism import canonical_json, sha256_hex
from replaykit.core.meta import EpisodeMeta
from replaykit.core.records import JSON
from replaykit.envs.extras import ExchangeRecord, StoredExchange
from replaykit.envs.results import Grade, GradeDoc, Observation, ObservationDoc

#: Response headers a cassette keeps (everything else is volatile or a secret).
KEPT_HEADERS = ("content-type", "content-encoding")


class RequestForm(TypedDict):
    """A request as matched and stored: method, path (query sorted), parsed body."""

    method: str
    path: str
    body: Any  # the parsed JSON body after normalisation rules ({"$text": …} when not JSON)


class LlmDigestForm(TypedDict):
    """What of an ``llm`` event the episode digest covers (the response as its sha256)."""

    kind: Literal["llm"]
    request: RequestForm
    status: int
    content: str
    chunks: list[int]


class EnvDigestForm(TypedDict):
    kind: Literal["env"]
    action: str
    observation: ObservationDoc
    state: str


class NetDigestForm(TypedDict):
    kind: Literal["net"]
    method: str
    url: str
    request_body: str
    status: int
    body: str
    size: int


class ErrorDigestForm(TypedDict):
    kind: Literal["error"]
    message: str


class LimitDigestForm(TypedDict):
    kind: Literal["limit"]
    limit: str
    value: float
    message: str


class GradeDigestForm(TypedDict):
    kind: Literal["grade"]
    grade: GradeDoc


DigestForm = (
    LlmDigestForm | EnvDigestForm | NetDigestForm | ErrorDigestForm | LimitDigestForm | GradeDigestForm
)


@dataclass
class LlmEvent:
    """One HTTP exchange with a model endpoint."""

    method: str
    path: str
    body: Any  # canonical parsed JSON body (secrets scrubbed), or {"$text": "..."}
    status: int
    reason: str
    headers: list[tuple[str, str]]
    content: bytes
    chunks: list[int]  # lengths of the chunks the client received, in order
    kind: str = field(default="llm", init=False)

    def request_form(self) -> RequestForm:
        return {"method": self.method, "path": self.path, "body": self.body}

    def split_chunks(self) -> list[bytes]:
        out, pos = [], 0
        for n in self.chunks:
            out.append(self.content[pos : pos + n])
            pos += n
        if pos < len(self.content):
            out.append(self.content[pos:])
        return out

    def digest_form(self) -> LlmDigestForm:
        return {
            "kind": "llm",
            "request": self.request_form(),
            "status": self.status,
            "content": sha256_hex(self.content),
            "chunks": self.chunks,
        }


@dataclass
class EnvEvent:
    """One environment step: the action, what it returned, the state after it."""

    action: str
    observation: Observation
    state_digest: str
    snapshot: str | None = None  # blob hash of a full snapshot, when requested
    snapshot_data: bytes | None = field(default=None, repr=False, compare=False)  # set while recording
    kind: str = field(default="env", init=False)

    def digest_form(self) -> EnvDigestForm:
        return {
            "kind": "env",
            "action": self.action,
            "observation": self.observation.to_dict(),
            "state": self.state_digest,
        }


#: network bodies are stored in chunks of this size: memory stays bounded whatever a body's size
NET_CHUNK = 4 * 1024 * 1024


@dataclass
class NetEvent:
    """One network exchange of the episode's environment, as its kind recorded it (``envs/extras.py``).

    The request is kept as method + scrubbed URL + the digest of its normalised body (never
    its headers or body: they may hold credentials); the response as status, reason, the
    non-volatile headers and the body as content-addressed chunks (``chunks``, in order;
    ``body`` is the sha256 of the whole). ``source`` says whether it was fetched
    (``upstream``) or served from the store (``store``); it is not part of the digest.
    """

    method: str
    url: str
    request_body: str
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: str
    size: int
    chunks: list[str] = field(default_factory=list)
    source: str = "upstream"
    body_path: str | None = field(default=None, repr=False, compare=False)  # the body's file while recording
    spool: str | None = field(default=None, repr=False, compare=False)  # removed once its bodies are stored
    kind: str = field(default="net", init=False)

    @classmethod
    def from_record(cls, record: ExchangeRecord) -> "NetEvent":
        """From an exchange an environment reported (its body still in ``body_path``)."""
        return cls(
            method=str(record["method"]),
            url=str(record["url"]),
            request_body=str(record["request_body"]),
            status=int(record["status"]),
            reason=str(record.get("reason") or ""),
            headers=[(str(k), str(v)) for k, v in record.get("headers") or []],
            body=str(record["body"]),
            size=int(record["size"]),
            source=str(record.get("source") or "upstream"),
            body_path=record.get("body_path"),
            spool=record.get("spool"),
        )

    def stored(self) -> StoredExchange:
        """The exchange as a store keeps it (its body as chunks): what a kind serves back."""
        return {
            "method": self.method,
            "url": self.url,
            "request_body": self.request_body,
            "status": self.status,
            "reason": self.reason,
            "headers": [list(h) for h in self.headers],
            "body": self.body,
            "size": self.size,
            "source": self.source,
            "chunks": list(self.chunks),
        }

    def digest_form(self) -> NetDigestForm:
        return {
            "kind": "net",
            "method": self.method,
            "url": self.url,
            "request_body": self.request_body,
            "status": self.status,
            "body": self.body,
            "size": self.size,
        }


@dataclass
class ErrorEvent:
    """The harness raised: its exception type and message (no traceback paths)."""

    message: str
    kind: str = field(default="error", init=False)

    def digest_form(self) -> ErrorDigestForm:
        return {"kind": "error", "message": self.message}


@dataclass
class LimitEvent:
    """The framework refused the harness's next call past one of the episode's limits: written
    by the rollout, never by the harness (an exception's name or message is never read as one).
    ``limit`` is one of :data:`LIMIT_NAMES`, ``value`` the limit in force (as the episode's
    ``meta["limits"]`` records it), ``message`` what the harness was told."""

    limit: str
    value: float
    message: str
    kind: str = field(default="limit", init=False)

    def digest_form(self) -> LimitDigestForm:
        return {"kind": "limit", "limit": self.limit, "value": self.value, "message": self.message}


@dataclass
class GradeEvent:
    grade: Grade
    kind: str = field(default="grade", init=False)

    def digest_form(self) -> GradeDigestForm:
        return {"kind": "grade", "grade": self.grade.to_dict()}


Event = LlmEvent | EnvEvent | NetEvent | ErrorEvent | LimitEvent | GradeEvent


def events_digest(events: list[Event]) -> str:
    """sha256 over the canonical event stream."""
    h = hashlib.sha256()
    for event in events:
        h.update(canonical_json(event.digest_form()).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


@dataclass
class Episode:
    """One recorded episode: its key, its events in order, and metadata."""

    key: CassetteKey
    events: list[Event]
    meta: EpisodeMeta = field(default_factory=lambda: EpisodeMeta())

    @property
    def id(self) -> str:
        return self.key.id

    @property
    def digest(self) -> str:
        return events_digest(self.events)

    @property
    def grade(self) -> Grade | None:
        for event in reversed(self.events):
            if isinstance(event, GradeEvent):
                return event.grade
        return None

    @property
    def llm_events(self) -> list[LlmEvent]:
        return [e for e in self.events if isinstance(e, LlmEvent)]

    @property
    def env_events(self) -> list[EnvEvent]:
        return [e for e in self.events if isinstance(e, EnvEvent)]

    @property
    def net_events(self) -> list[NetEvent]:
        return [e for e in self.events if isinstance(e, NetEvent)]

    def usage_tokens(self) -> int:
        """Total tokens the endpoint reported (0 where it reported none)."""
        return sum(event_tokens(event) for event in self.llm_events)


def usage_reports(event: LlmEvent) -> Iterator[dict[str, JSON]]:
    """Each ``usage`` object one model call's answer carries, JSON or streamed: chat
    completions' top-level ``usage``, the Responses API's ``response.usage``."""
    for line in event.content.decode("utf-8", "replace").splitlines():
        text = line[5:].strip() if line.startswith("data:") else line
        if '"usage"' not in text:
            continue
        try:
            doc = json.loads(text)
        except ValueError:
            continue
        usage = (
            (doc.get("usage") or (doc.get("response") or {}).get("usage")) if isinstance(doc, dict) else None
        )
        if isinstance(usage, dict):
            yield usage


def usage_count(usage: Mapping[str, JSON], *names: str) -> int:
    """The first of ``names`` a ``usage`` object reports (a nonzero count, the next name tried
    otherwise), as a whole number; 0 when none is a number."""
    value = next((v for name in names if (v := usage.get(name))), 0)
    return int(value) if isinstance(value, int | float) else 0


def event_tokens(event: LlmEvent) -> int:
    """The tokens one model call's answer reports (0 where it reports none)."""
    return sum(usage_count(usage, "total_tokens") for usage in usage_reports(event))
