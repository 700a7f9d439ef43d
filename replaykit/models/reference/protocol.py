"""Wire-neutral types of the reference server: a parsed request, an assistant turn.

A model handler turns a :class:`ChatRequest` into an :class:`AssistantTurn`; an
endpoint renderer (``sse.py`` for Chat Completions, later one for the Responses
API) turns that turn into response bytes. Nothing here reads a clock or an
unseeded random source.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from replaykit.core.determinism import digest_of
from replaykit.core.records import JSON


@dataclass(frozen=True)
class ToolCall:
    """One function call the assistant makes; ``arguments`` is JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class AssistantTurn:
    """What a model says next: prose, tool calls, and why it stopped."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ChatRequest:
    """A validated ``POST /v1/chat/completions`` body.

    ``digest`` is the sha256 of the body's canonical JSON: every id in the
    response derives from it, so equal requests get byte-identical responses.
    Only each message's ``role`` (a string) and the tools' being objects are checked;
    the rest is the client's JSON (or a Responses request's Chat-style messages),
    read by narrowing.
    """

    body: Mapping[str, object]
    digest: str
    model: str
    messages: Sequence[Mapping[str, object]]
    tools: Sequence[Mapping[str, object]] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    seed: int = 0


class ApiError(Exception):
    """An OpenAI-style error response (status + ``{"error": {...}}`` body)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def payload(self) -> dict[str, JSON]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def dumps(value: object) -> bytes:
    """Compact JSON bytes in insertion order (OpenAI's field order), UTF-8 kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_json_object(raw: bytes) -> dict[str, JSON]:
    """The request body as a JSON object, or a 400 ``ApiError``."""
    try:
        value: JSON = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, f"We could not parse the JSON body of your request: {exc}") from exc
    if not isinstance(value, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return value


def objects(value: JSON) -> list[Mapping[str, JSON]] | None:
    """``value`` as a list of JSON objects, or ``None`` if it is not one (decoded JSON
    objects are dicts; ``Mapping`` narrows them to ``Mapping[str, JSON]``)."""
    if not isinstance(value, list):
        return None
    items = [item for item in value if isinstance(item, Mapping)]
    return items if len(items) == len(value) else None


def schema_properties(parameters: object) -> Mapping[str, object]:
    """A tool's JSON-schema ``properties`` (empty if it has none)."""
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


def parse_chat_request(body: dict[str, JSON]) -> ChatRequest:
    """Validate a Chat Completions body; malformed fields raise a 400 ``ApiError``."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "you must provide a model parameter", param="model")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise ApiError(400, "'messages' must be a non-empty array", param="messages")
    messages: list[Mapping[str, JSON]] = []
    for i, message in enumerate(raw_messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ApiError(400, f"messages[{i}] must be an object with a 'role'", param=f"messages[{i}]")
        messages.append(message)
    tools = objects(body.get("tools") or [])
    if tools is None:
        raise ApiError(400, "'tools' must be an array of objects", param="tools")
    if body.get("tool_choice") == "none":
        tools = []
    seed = body.get("seed", 0)
    if seed is None:
        seed = 0
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ApiError(400, "'seed' must be an integer", param="seed")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise ApiError(400, "'stream_options' must be an object", param="stream_options")
    return ChatRequest(
        body=body,
        digest=digest_of(body),
        model=model,
        messages=messages,
        tools=tools,
        stream=bool(body.get("stream", False)),
        include_usage=bool(stream_options.get("include_usage", False)),
        seed=seed,
    )


def message_text(message: Mapping[str, object]) -> str:
    """The text of a message: a string ``content`` or the text parts of a list."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def estimate_tokens(text: str) -> int:
    """The deterministic token approximation: ``len(text) // 4``, at least 1."""
    return max(1, len(text) // 4)


def usage_for(request: ChatRequest, turn: AssistantTurn) -> dict[str, int]:
    """Prompt tokens from the canonical messages + tools, completion from the reply."""
    prompt = estimate_tokens(dumps(request.messages).decode() + dumps(request.tools).decode())
    reply = (turn.content or "") + "".join(c.name + c.arguments for c in turn.tool_calls)
    completion = estimate_tokens(reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
