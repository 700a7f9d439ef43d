"""Render an :class:`AssistantTurn` as Chat Completions JSON or as SSE chunks.

Every field is a pure function of the request (its digest, model, flags) and the
turn: ids derive from the request digest, ``created`` is ``SOURCE_DATE_EPOCH``.
A streamed reply is a list of SSE events, one HTTP chunk each:

1. a role chunk (``{"role": "assistant", "content": ""}``);
2. the content split into a few deltas;
3. per tool call, a delta with ``id``/``type``/``name`` and empty ``arguments``,
   then the arguments split into pieces;
4. a chunk with an empty delta and the ``finish_reason``;
5. a usage chunk (``choices: []``) when ``stream_options.include_usage``;
6. ``data: [DONE]``.
"""

from __future__ import annotations

from replaykit.core.determinism import SOURCE_DATE_EPOCH
from replaykit.core.records import JSON
from replaykit.models.reference.protocol import AssistantTurn, ChatRequest, dumps, usage_for

SYSTEM_FINGERPRINT = "fp_replaykit_reference"
CONTENT_PIECES = 4
ARGUMENT_PIECES = 3


def completion_id(request: ChatRequest) -> str:
    return f"chatcmpl-{request.digest[:24]}"


def message_dict(turn: AssistantTurn) -> dict[str, JSON]:
    message: dict[str, JSON] = {"role": "assistant", "content": turn.content, "refusal": None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]
    return message


def chat_completion(request: ChatRequest, turn: AssistantTurn) -> dict[str, JSON]:
    """The non-streaming ``chat.completion`` object."""
    return {
        "id": completion_id(request),
        "object": "chat.completion",
        "created": SOURCE_DATE_EPOCH,
        "model": request.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [
            {"index": 0, "message": message_dict(turn), "logprobs": None, "finish_reason": turn.finish_reason}
        ],
        "usage": usage_for(request, turn),
    }


def split_text(text: str, pieces: int) -> list[str]:
    """Split text into about ``pieces`` non-empty parts, cutting after a space when possible.

    Joining the parts gives the text back exactly.
    """
    if not text:
        return []
    pieces = max(1, min(pieces, len(text)))
    size = -(-len(text) // pieces)
    parts: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", start + 1, end + 1)
            if space > start:
                end = space + 1 if space + 1 < len(text) else end
        parts.append(text[start:end])
        start = end
    return parts


def chat_chunks(request: ChatRequest, turn: AssistantTurn) -> list[dict[str, JSON]]:
    """The ``chat.completion.chunk`` objects of a streamed reply, in order."""
    base: dict[str, JSON] = {
        "id": completion_id(request),
        "object": "chat.completion.chunk",
        "created": SOURCE_DATE_EPOCH,
        "model": request.model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }

    def chunk(delta: dict[str, JSON], finish_reason: str | None = None) -> dict[str, JSON]:
        out: dict[str, JSON] = dict(base)
        out["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
        if request.include_usage:
            out["usage"] = None
        return out

    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    for piece in split_text(turn.content or "", CONTENT_PIECES):
        chunks.append(chunk({"content": piece}))
    for index, call in enumerate(turn.tool_calls):
        head: dict[str, JSON] = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [head]}))
        for piece in split_text(call.arguments, ARGUMENT_PIECES):
            chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    chunks.append(chunk({}, turn.finish_reason))
    if request.include_usage:
        tail: dict[str, JSON] = dict(base)
        tail["choices"] = []
        tail["usage"] = usage_for(request, turn)
        chunks.append(tail)
    return chunks


def sse_event(data: dict[str, JSON] | str) -> bytes:
    """One SSE event: ``data: <json>\\n\\n`` (or ``data: [DONE]\\n\\n`` for a string)."""
    payload = data.encode("utf-8") if isinstance(data, str) else dumps(data)
    return b"data: " + payload + b"\n\n"


def sse_events(request: ChatRequest, turn: AssistantTurn) -> list[bytes]:
    """Every SSE event of a streamed reply, ``[DONE]`` last."""
    return [sse_event(c) for c in chat_chunks(request, turn)] + [sse_event("[DONE]")]
