"""Readable views of the store: cassette listings and one cassette's events."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal, TypedDict

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.events import EnvEvent, ErrorEvent, Event, LlmEvent, NetEvent
from replaykit.cassette.keys import KeyDoc
from replaykit.core.errors import ConfigError
from replaykit.core.records import EpisodeMeta
from replaykit.envs.base import GradeDoc
from replaykit.episodes.outcomes import stored_outcome

TRUNCATE = 400


def _cut(text: str, full: bool) -> str:
    if full or len(text) <= TRUNCATE:
        return text
    return text[:TRUNCATE] + f"… [{len(text) - TRUNCATE} more chars; --full shows all]"


LS_COLUMNS = (
    "id",
    "task_id",
    "seed",
    "model",
    "harness_sha",
    "kind",
    "n_llm",
    "n_env",
    "reward",
    "passed",
    "digest",
    "created_at",
)


def list_cassettes(
    store: StoreBackend, run_id: str | None = None, limit: int | None = None
) -> list[dict[str, object]]:
    """Cassette rows, oldest first; with ``limit``, only the newest ``limit`` (a run's: its last).
    Each row's ``outcome`` is derived from its episode's events (``episodes.outcomes``)."""
    if limit is not None and limit < 0:
        raise ConfigError(f"--limit must be 0 or more, not {limit}")
    if run_id:
        ids = store.get_run(run_id).cassettes
        if limit is not None:
            ids = ids[len(ids) - limit :] if limit else []
        rows: list[Mapping[str, object]] = [store.cassette_row(i) for i in ids]
        listed = [{c: r[c] for c in LS_COLUMNS} for r in rows]
    else:
        listed = [dict(r) for r in store.cassette_summaries(LS_COLUMNS, limit)]
    for row in listed:
        row["outcome"] = _outcome(store, row)
    return listed


def _outcome(store: StoreBackend, row: Mapping[str, object]) -> str:
    """A listed cassette's outcome (a proxy session or a proposal has none: its kind)."""
    if row.get("kind") not in (None, "", "episode"):
        return "-"
    return stored_outcome(store, str(row["id"])).outcome


def count_cassettes(store: StoreBackend, run_id: str | None = None) -> int:
    return len(store.get_run(run_id).cassettes) if run_id else store.count_cassettes()


class ShownRequest(TypedDict):
    method: str
    path: str
    body: str  # JSON text, cut unless --full


class ShownResponse(TypedDict):
    status: int
    chunks: int
    bytes: int
    body: str


class ShownLlm(TypedDict):
    position: int
    kind: Literal["llm"]
    request: ShownRequest
    response: ShownResponse


class ShownEnv(TypedDict):
    position: int
    kind: Literal["env"]
    action: str
    exit_code: int
    timed_out: bool
    stdout: str
    stderr: str
    state_digest: str
    snapshot: str | None


class ShownNet(TypedDict):
    position: int
    kind: Literal["net"]
    method: str
    url: str
    status: int
    bytes: int
    body: str
    source: str


class ShownError(TypedDict):
    position: int
    kind: Literal["error"]
    message: str


class ShownGrade(TypedDict):
    position: int
    kind: Literal["grade"]
    grade: GradeDoc


ShownEvent = ShownLlm | ShownEnv | ShownNet | ShownError | ShownGrade


class CassetteView(TypedDict):
    """``cassettes show ID``: the key, digest, metadata and each event, long texts cut."""

    id: str
    key: KeyDoc
    digest: str
    meta: EpisodeMeta  # Episode.meta, as recorded
    events: list[ShownEvent]


def _shown(position: int, event: Event, full: bool) -> ShownEvent:
    if isinstance(event, LlmEvent):
        return {
            "position": position,
            "kind": "llm",
            "request": {
                "method": event.method,
                "path": event.path,
                "body": _cut(json.dumps(event.body, ensure_ascii=False), full),
            },
            "response": {
                "status": event.status,
                "chunks": len(event.chunks),
                "bytes": len(event.content),
                "body": _cut(event.content.decode("utf-8", "replace"), full),
            },
        }
    if isinstance(event, EnvEvent):
        return {
            "position": position,
            "kind": "env",
            "action": _cut(event.action, full),
            "exit_code": event.observation.exit_code,
            "timed_out": event.observation.timed_out,
            "stdout": _cut(event.observation.stdout, full),
            "stderr": _cut(event.observation.stderr, full),
            "state_digest": event.state_digest,
            "snapshot": event.snapshot,
        }
    if isinstance(event, NetEvent):
        return {
            "position": position,
            "kind": "net",
            "method": event.method,
            "url": event.url,
            "status": event.status,
            "bytes": event.size,
            "body": event.body,
            "source": event.source,
        }
    if isinstance(event, ErrorEvent):
        return {"position": position, "kind": "error", "message": event.message}
    return {"position": position, "kind": "grade", "grade": event.grade.to_dict()}


def show_cassette(store: StoreBackend, cassette_id: str, full: bool = False) -> CassetteView:
    cid = store.resolve_id("cassettes", cassette_id, what="cassette")
    episode = store.get_episode(cid)
    events = [_shown(position, event, full) for position, event in enumerate(episode.events)]
    return {
        "id": cid,
        "key": episode.key.canonical(),
        "digest": episode.digest,
        "meta": episode.meta,
        "events": events,
    }
