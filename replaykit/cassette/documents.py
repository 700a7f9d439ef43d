"""The stored shape of a cassette document (format 2), as the codec writes and reads it.

An episode document holds its key, its ``meta`` fields and its events; large values
are blob references (``{"b": sha256}``), small ones inline (``{"v": value}``). A
request body's list fields that extend the previous request's list (a re-sent chat
history) keep only the prefix length ``p`` and the new items ``l``.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict, final

from replaykit.cassette.keys import KeyDoc
from replaykit.envs.results import GradeDoc


@final
class ValueRef(TypedDict, total=False):
    """One JSON value: inline (``v``) or the sha256 of its canonical JSON blob (``b``)."""

    v: object
    b: str


@final
class ListRef(TypedDict):
    """A list field of a request body: the previous request's first ``p`` items, then ``l``."""

    l: list[ValueRef]  # noqa: E741 - the stored field name
    p: NotRequired[int]


class BodyDoc(TypedDict, total=False):
    """A request body: a mapping field by field, or any other JSON value (``raw``)."""

    fields: dict[str, ValueRef | ListRef]
    raw: ValueRef


class LlmEventDoc(TypedDict):
    kind: Literal["llm"]
    method: str
    path: str
    body: BodyDoc
    status: int
    reason: str
    headers: list[list[str]]
    content: str  # the blob of the response bytes
    chunks: list[int]


class EnvEventDoc(TypedDict):
    kind: Literal["env"]
    action: ValueRef
    stdout: ValueRef
    stderr: ValueRef
    exit_code: int
    timed_out: bool
    state: str
    snapshot: str | None  # a full snapshot's blob, or its digest


class NetEventDoc(TypedDict):
    """One exchange through the frozen network (``events.NetEvent``): the request as method,
    scrubbed URL and body digest; the response body as content-addressed chunks."""

    kind: Literal["net"]
    method: str
    url: str
    request_body: str
    status: int
    reason: NotRequired[str]
    headers: list[list[str]]
    body: str
    size: int
    chunks: list[str]
    source: NotRequired[str]


class ErrorEventDoc(TypedDict):
    kind: Literal["error"]
    message: str


class LimitEventDoc(TypedDict):
    """A limit the framework enforced (``events.LimitEvent``)."""

    kind: Literal["limit"]
    limit: str
    value: float
    message: str


class GradeEventDoc(TypedDict):
    kind: Literal["grade"]
    grade: GradeDoc


EventDoc = LlmEventDoc | EnvEventDoc | NetEventDoc | ErrorEventDoc | LimitEventDoc | GradeEventDoc


class EpisodeDoc(TypedDict):
    format: int
    key: KeyDoc
    meta: dict[str, ValueRef]  # format 1 kept the values inline
    events: list[EventDoc]
