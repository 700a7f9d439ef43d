"""Readable views of the store: one cassette's events, its lineage (the cassette listing is
``listing.py``'s)."""

from __future__ import annotations

import json
from typing import Literal, TypedDict

from replaykit.cassette.backend import EpisodeStore, RunStore
from replaykit.cassette.events import EnvEvent, Episode, ErrorEvent, Event, LimitEvent, LlmEvent, NetEvent
from replaykit.cassette.facets import call_facet, ended_by, facet_counts
from replaykit.cassette.keys import KeyDoc
from replaykit.cassette.lineage import ClaimStatus, check_claim, claim_of, fork_of
from replaykit.core.determinism import canonical_json
from replaykit.core.glossary import fork_call
from replaykit.core.meta import EpisodeMeta
from replaykit.envs.results import GradeDoc
from replaykit.episodes.network import Exchange

TRUNCATE = 400


def _cut(text: str, full: bool) -> str:
    if full or len(text) <= TRUNCATE:
        return text
    return text[:TRUNCATE] + f"… [{len(text) - TRUNCATE} more chars; --full shows all]"


class ShownRequest(TypedDict):
    method: str
    path: str
    body: str  # JSON text, cut unless --full


class ShownResponse(TypedDict):
    status: int
    chunks: int
    bytes: int
    body: str
    facet: str | None  # what the answer was (cassette/facets.py); None: no answer


class ShownLlm(TypedDict):
    position: int
    kind: Literal["llm"]
    request: ShownRequest
    response: ShownResponse


class EnvStep(TypedDict):
    """An environment step as shown: ``cassettes show`` (``ShownEnv``) and the report (``EnvTurn``)."""

    position: int
    kind: Literal["env"]
    action: str
    exit_code: int
    timed_out: bool
    stdout: str
    stderr: str
    state_digest: str


class ShownEnv(EnvStep):
    snapshot: str | None


class ShownNet(Exchange):
    """A frozen-network exchange in the episode: ``net ls``'s row, at its position."""

    kind: Literal["net"]


class ShownError(TypedDict):
    position: int
    kind: Literal["error"]
    message: str


class ShownLimit(TypedDict):
    position: int
    kind: Literal["limit"]
    limit: str
    value: float
    message: str


class ShownGrade(TypedDict):
    position: int
    kind: Literal["grade"]
    grade: GradeDoc


ShownEvent = ShownLlm | ShownEnv | ShownNet | ShownError | ShownLimit | ShownGrade


class ShownReuse(TypedDict):
    """What the episode was served from a donor (its claim, checked against the donor's events)."""

    donor: str
    events: int  # events 0..events-1
    calls: int
    basis: str
    status: ClaimStatus  # checked | donor absent
    parted: str  # why it is live from event ``events`` on (derived from both; "" when unknown or never)


class ShownFork(TypedDict):
    """One fork of the episode: its cassette, where it went live, how it ended."""

    cassette_id: str
    fork_step: int  # the parent's model calls it was served (--at): live from call fork_step + 1
    fork_point: str  # "call 2 of 3" (core/glossary.fork_call: of the parent's model calls)
    model: str
    harness_sha: str
    reward: float | None
    passed: bool


class Lineage(TypedDict):
    """What an episode was served (``reused``), what it forked from and where (the event of its
    first live call: ``fork_position``), its forks: every part checked as it is read."""

    reused: ShownReuse | None
    forked_from: str | None
    fork_step: int | None  # the parent's model calls it was served (--at)
    fork_point: str | None  # "call 2 of 3": its first live call of the parent's (core/glossary.fork_call)
    fork_position: int | None
    forks: list[ShownFork]


class CassetteView(Lineage):
    """``cassettes show ID``: the key, digest, metadata and each event, long texts cut; what
    it was served, what it forked from, its forks (``Lineage``)."""

    id: str
    key: KeyDoc
    digest: str
    meta: EpisodeMeta  # Episode.meta, as recorded
    events: list[ShownEvent]
    call_facets: dict[str, int]  # its calls by facet (derived from their bytes)
    ended_by: str | None  # the facet of the call gone wrong that ended it, if one did


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
                "facet": call_facet(event),
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
    if isinstance(event, LimitEvent):
        return {
            "position": position,
            "kind": "limit",
            "limit": event.limit,
            "value": event.value,
            "message": event.message,
        }
    return {"position": position, "kind": "grade", "grade": event.grade.to_dict()}


def show_cassette(store: RunStore, cassette_id: str, full: bool = False) -> CassetteView:
    cid = store.resolve_id("cassettes", cassette_id, what="cassette")
    episode = store.get_episode(cid)
    events = [_shown(position, event, full) for position, event in enumerate(episode.events)]
    return {
        "id": cid,
        "key": episode.key.canonical(),
        "digest": episode.digest,
        "meta": episode.meta,
        "events": events,
        "call_facets": facet_counts(episode.events),
        "ended_by": ended_by(episode.events),
        **lineage(store, episode),
    }


def lineage(store: EpisodeStore, episode: Episode) -> Lineage:
    """The episode's claim checked against its donor (a false claim is store corruption,
    raised), its parent and fork point, and its forks (each read verified)."""
    claim, fork = claim_of(episode), fork_of(episode.key)
    status = check_claim(store, episode)
    donor = store.get_episode(claim["donor"]) if claim and status == "checked" else None
    forks: list[ShownFork] = []
    for row in store.find_forks(episode.key):
        child = store.get_episode(row["id"])
        at = fork_of(child.key)
        grade = child.grade
        forks.append(
            {
                "cassette_id": child.id,
                "fork_step": at[1] if at else -1,
                "fork_point": fork_call(at[1] if at else -1, len(episode.llm_events)),
                "model": child.key.model.name,
                "harness_sha": child.key.harness_sha,
                "reward": grade.reward if grade else None,
                "passed": bool(grade and grade.passed),
            }
        )
    calls = [i for i, e in enumerate(episode.events) if isinstance(e, LlmEvent)]
    return {
        "reused": None
        if claim is None or status == "none"
        else {
            "donor": claim["donor"],
            "events": claim["events"],
            "calls": claim["calls"],
            "basis": claim["basis"],
            "status": status,
            "parted": _parted(episode, donor, claim["events"], fork[1] if fork else None),
        },
        "forked_from": fork[0] if fork else None,
        "fork_step": fork[1] if fork else None,
        "fork_point": fork_call(fork[1], _calls_of(store, fork[0], donor)) if fork else None,
        "fork_position": (calls[fork[1]] if 0 <= fork[1] < len(calls) else len(episode.events))
        if fork
        else None,
        "forks": forks,
    }


def _calls_of(store: EpisodeStore, parent: str, donor: Episode | None) -> int | None:
    """The parent's model calls (``None`` when it is not in this store), read once: a fork's
    donor is its parent."""
    if donor is not None and donor.id == parent:
        return len(donor.llm_events)
    return store.verified_columns(parent)["n_llm"] if store.has(parent) else None


def _parted(episode: Episode, donor: Episode | None, k: int, fork_step: int | None) -> str:
    """Why an episode served ``k`` of a donor's events is live from event ``k`` on (a fork:
    its fork point, model call ``fork_step + 1`` counted from 1)."""
    if donor is None or k >= len(episode.events):
        return ""
    mine, theirs = episode.events[k], donor.events[k] if k < len(donor.events) else None
    calls_before = sum(isinstance(e, LlmEvent) for e in episode.events[:k])
    if fork_step is not None and isinstance(mine, LlmEvent) and calls_before == fork_step:
        return f"event {k} is model call {fork_step + 1}, the fork point"
    if theirs is None:
        return f"the donor ended before event {k}"
    if mine.kind != theirs.kind:
        return f"event {k} is a {mine.kind} event where the donor has a {theirs.kind} event"
    if isinstance(mine, EnvEvent) and isinstance(theirs, EnvEvent):
        mf, tf = mine.digest_form(), theirs.digest_form()
        what = next((name for name in ("action", "observation", "state") if mf[name] != tf[name]), "")
        return f"the environment's {what} at event {k} differs from the donor's" if what else ""
    if isinstance(mine, LlmEvent) and isinstance(theirs, LlmEvent):
        if canonical_json(mine.request_form()) != canonical_json(theirs.request_form()):
            return f"the request at event {k} is not the donor's"
        if not 200 <= theirs.status < 300:
            return f"the donor's answer at event {k} is HTTP {theirs.status}, never served again"
        return f"the donor's answer at event {k} holds a scrubbed secret, never served again"
    return f"the {mine.kind} event at event {k} differs from the donor's"
