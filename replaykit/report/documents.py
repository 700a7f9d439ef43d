"""The JSON-ready documents the report layer hands out: transcript turns, episode diffs.

A transcript is a list of turns, each with a ``kind`` (``call``, ``env``, ``error``,
``grade``); a diff aligns two episodes and names their first difference. These are what
``cassettes show --transcript --json`` and ``cassettes diff --json`` print.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from replaykit.core.records import JSON
from replaykit.envs.base import GradeDoc


class ToolCall(TypedDict):
    id: str
    name: str
    arguments: str


class Message(TypedDict):
    """One message of a conversation, whatever API carried it (chat or Responses)."""

    role: str
    content: str
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]


class Reply(TypedDict):
    """What one call answered (``parse_response``)."""

    status: int
    stream: bool
    messages: list[Message]
    usage: JSON  # the endpoint's usage object, as sent (None when absent)
    system_fingerprint: JSON
    chunks: NotRequired[JSON]
    error: NotRequired[str]
    model: NotRequired[JSON]


class EpisodeBrief(TypedDict):
    """Who an episode is (``episode_summary``): its key's fields, digest and sizes."""

    id: str
    task_id: str
    seed: int
    model: str
    harness_sha: str
    kind: str
    digest: str
    tokens: int
    llm_calls: int
    steps: int


class CallTurn(TypedDict):
    kind: Literal["call"]
    position: int
    call: int
    method: str
    path: str
    settings: dict[str, JSON]
    folded: int
    sent: int
    new: list[Message]
    reply: list[Message]
    status: int
    stream: bool
    chunks: JSON
    usage: JSON
    system_fingerprint: JSON
    error: str | None


class EnvTurn(TypedDict):
    kind: Literal["env"]
    position: int
    action: str
    exit_code: int
    timed_out: bool
    stdout: str
    stderr: str
    state_digest: str


class ErrorTurn(TypedDict):
    kind: Literal["error"]
    position: int
    message: str


class GradeTurn(GradeDoc):
    kind: Literal["grade"]
    position: int


Turn = CallTurn | EnvTurn | ErrorTurn | GradeTurn


class TranscriptDoc(TypedDict):
    """``cassettes show ID --transcript``."""

    episode: EpisodeBrief
    turns: list[Turn]


class SideRow(TypedDict):
    tag: str  # equal | replace | delete | insert | skip
    a: str | None
    b: str | None


class AlignedRow(TypedDict):
    position: int
    a: str
    b: str
    index: int
    same: bool
    part: str | None


class FirstDifference(TypedDict):
    position: int
    kind: str
    index: int
    part: str
    label: str
    a_lines: list[str]
    b_lines: list[str]
    unified: list[str]
    side_by_side: list[SideRow]


class EpisodeDiff(TypedDict):
    """Two episodes aligned (``diff_episodes``); a verdict's units leave ``aligned`` out."""

    a: EpisodeBrief
    b: EpisodeBrief
    identical: bool
    shared_prefix: int
    first_difference: FirstDifference | None
    aligned: NotRequired[list[AlignedRow]]
    grades: list[GradeDoc | None]


class UnitDiff(EpisodeDiff):
    unit: str
    movement: str  # new solve | regression | unchanged


class VerdictDiff(TypedDict):
    """``cassettes diff VERDICT``: the baseline vs candidate episode of each moved unit."""

    verdict_id: str
    accept: bool
    reason: str
    baseline_sha: str
    candidate_sha: str | None
    units: list[UnitDiff]
