"""Readable views of the store: cassette listings and one cassette's events."""

from __future__ import annotations

import json
from typing import Any

from replaykit.cassette.events import EnvEvent, ErrorEvent, GradeEvent, LlmEvent, NetEvent
from replaykit.cassette.backend import StoreBackend
from replaykit.core.errors import ConfigError

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
) -> list[dict[str, Any]]:
    """Cassette rows, oldest first; with ``limit``, only the newest ``limit`` (a run's: its last)."""
    if limit is not None and limit < 0:
        raise ConfigError(f"--limit must be 0 or more, not {limit}")
    if run_id:
        ids = store.get_run(run_id).cassettes
        if limit is not None:
            ids = ids[len(ids) - limit :] if limit else []
        rows = [store.cassette_row(i) for i in ids]
        return [{c: r[c] for c in LS_COLUMNS} for r in rows]
    return store.cassette_summaries(LS_COLUMNS, limit)


def count_cassettes(store: StoreBackend, run_id: str | None = None) -> int:
    return len(store.get_run(run_id).cassettes) if run_id else store.count_cassettes()


def show_cassette(store: StoreBackend, cassette_id: str, full: bool = False) -> dict[str, Any]:
    cid = store.resolve_id("cassettes", cassette_id, what="cassette")
    episode = store.get_episode(cid)
    events: list[dict[str, Any]] = []
    for position, event in enumerate(episode.events):
        item: dict[str, Any] = {"position": position, "kind": event.kind}
        if isinstance(event, LlmEvent):
            item.update(
                request={
                    "method": event.method,
                    "path": event.path,
                    "body": _cut(json.dumps(event.body, ensure_ascii=False), full),
                },
                response={
                    "status": event.status,
                    "chunks": len(event.chunks),
                    "bytes": len(event.content),
                    "body": _cut(event.content.decode("utf-8", "replace"), full),
                },
            )
        elif isinstance(event, EnvEvent):
            item.update(
                action=_cut(event.action, full),
                exit_code=event.observation.exit_code,
                timed_out=event.observation.timed_out,
                stdout=_cut(event.observation.stdout, full),
                stderr=_cut(event.observation.stderr, full),
                state_digest=event.state_digest,
                snapshot=event.snapshot,
            )
        elif isinstance(event, NetEvent):
            item.update(
                method=event.method,
                url=event.url,
                status=event.status,
                bytes=event.size,
                body=event.body,
                source=event.source,
            )
        elif isinstance(event, ErrorEvent):
            item["message"] = event.message
        elif isinstance(event, GradeEvent):
            item["grade"] = event.grade.to_dict()
        events.append(item)
    return {
        "id": cid,
        "key": episode.key.canonical(),
        "digest": episode.digest,
        "meta": episode.meta,
        "events": events,
    }
