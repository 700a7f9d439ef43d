"""A Responses turn on the wire: the response object, or its SSE events.

Output items are a ``message`` (if the turn has text) then one ``function_call`` per
call (``custom_tool_call`` for a custom ``apply_patch`` tool); every id derives from
the request's digest. Streaming is SSE (``event:`` + ``data:``), one HTTP chunk per
event, with ``sequence_number``s, ``response.created`` first and
``response.completed`` (carrying ``usage``) last.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias, TypedDict

from replaykit.core.determinism import SOURCE_DATE_EPOCH, sha256_hex
from replaykit.core.records import JSON
from replaykit.models.reference.protocol import AssistantTurn, dumps, estimate_tokens
from replaykit.models.reference.responses_request import ResponsesRequest
from replaykit.models.reference.sse import ARGUMENT_PIECES, CONTENT_PIECES, split_text

if TYPE_CHECKING:
    from openai.types.responses import ResponseFunctionToolCallParam, ResponseOutputTextParam


class MessageItem(TypedDict):
    """A ``message`` output item (openai's ``ResponseOutputMessageParam``, with a list to index)."""

    id: str
    type: Literal["message"]
    status: Literal["in_progress", "completed"]
    content: list[ResponseOutputTextParam]
    role: Literal["assistant"]


class CustomToolCallItem(TypedDict):
    """A ``custom_tool_call`` output item (openai's ``ResponseCustomToolCallParam`` plus ``status``)."""

    id: str
    type: Literal["custom_tool_call"]
    status: Literal["in_progress", "completed"]
    call_id: str
    input: str
    name: str


OutputItem: TypeAlias = "MessageItem | CustomToolCallItem | ResponseFunctionToolCallParam"


def _item_id(request: ResponsesRequest, prefix: str, n: int) -> str:
    return f"{prefix}_{sha256_hex(f'{request.digest}:{prefix}:{n}')[:32]}"


def output_items(request: ResponsesRequest, turn: AssistantTurn) -> list[OutputItem]:
    """The completed output items: a message (if any text), then the calls."""
    items: list[OutputItem] = []
    if turn.content:
        part: ResponseOutputTextParam = {
            "type": "output_text",
            "annotations": [],
            "logprobs": [],
            "text": turn.content,
        }
        items.append(
            {
                "id": _item_id(request, "msg", 0),
                "type": "message",
                "status": "completed",
                "content": [part],
                "role": "assistant",
            }
        )
    for n, call in enumerate(turn.tool_calls):
        if (
            request.patch_tool is not None
            and call.name == "apply_patch"
            and request.patch_tool.kind == "patch-custom"
        ):
            items.append(
                {
                    "id": _item_id(request, "ctc", n),
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": call.id,
                    "input": call.arguments,
                    "name": call.name,
                }
            )
        else:
            item: ResponseFunctionToolCallParam = {
                "id": _item_id(request, "fc", n),
                "type": "function_call",
                "status": "completed",
                "arguments": call.arguments,
                "call_id": call.id,
                "name": call.name,
            }
            tool = request.tool
            if tool is not None and tool.namespace is not None and call.name == tool.name:
                item["namespace"] = tool.namespace  # a namespaced tool is called by its name and namespace
            items.append(item)
    return items


def usage(request: ResponsesRequest, turn: AssistantTurn) -> dict[str, JSON]:
    prompt = estimate_tokens(dumps(request.messages).decode())
    completion = estimate_tokens(
        (turn.content or "") + "".join(c.name + c.arguments for c in turn.tool_calls)
    )
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def response_object(request: ResponsesRequest, turn: AssistantTurn, done: bool) -> dict[str, object]:
    body = request.body
    return {
        "id": f"resp_{request.digest[:32]}",
        "object": "response",
        "created_at": SOURCE_DATE_EPOCH,
        "status": "completed" if done else "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": body.get("max_output_tokens"),
        "model": request.model,
        "output": output_items(request, turn) if done else [],
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": bool(body.get("store", False)),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": usage(request, turn) if done else None,
        "user": None,
        "metadata": {},
    }


def _item_events(index: int, item: OutputItem) -> list[dict[str, object]]:
    ref = {"item_id": item["id"], "output_index": index}
    events: list[dict[str, object]] = []
    if item["type"] == "message":
        text = item["content"][0]["text"]
        empty = dict(item, status="in_progress", content=[])
        part = dict(item["content"][0], text="")
        events.append({"type": "response.output_item.added", "output_index": index, "item": empty})
        events.append({"type": "response.content_part.added", **ref, "content_index": 0, "part": part})
        for piece in split_text(text, CONTENT_PIECES):
            events.append(
                {
                    "type": "response.output_text.delta",
                    **ref,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                }
            )
        events.append(
            {"type": "response.output_text.done", **ref, "content_index": 0, "text": text, "logprobs": []}
        )
        events.append(
            {"type": "response.content_part.done", **ref, "content_index": 0, "part": item["content"][0]}
        )
    elif item["type"] == "function_call":
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": dict(item, status="in_progress", arguments=""),
            }
        )
        for piece in split_text(item["arguments"], ARGUMENT_PIECES):
            events.append({"type": "response.function_call_arguments.delta", **ref, "delta": piece})
        events.append(
            {
                "type": "response.function_call_arguments.done",
                **ref,
                "name": item["name"],
                "arguments": item["arguments"],
            }
        )
    else:
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": dict(item, status="in_progress", input=""),
            }
        )
        for piece in split_text(item["input"], ARGUMENT_PIECES):
            events.append({"type": "response.custom_tool_call_input.delta", **ref, "delta": piece})
        events.append({"type": "response.custom_tool_call_input.done", **ref, "input": item["input"]})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def stream_events(request: ResponsesRequest, turn: AssistantTurn) -> list[bytes]:
    """Every SSE event of a streamed response, ``response.completed`` last."""
    events: list[dict[str, object]] = [
        {"type": "response.created", "response": response_object(request, turn, False)},
        {"type": "response.in_progress", "response": response_object(request, turn, False)},
    ]
    for index, item in enumerate(output_items(request, turn)):
        events.extend(_item_events(index, item))
    events.append({"type": "response.completed", "response": response_object(request, turn, True)})
    out = []
    for n, event in enumerate(events):
        event = {
            "type": event["type"],
            "sequence_number": n,
            **{k: v for k, v in event.items() if k != "type"},
        }
        out.append(b"event: " + str(event["type"]).encode("ascii") + b"\ndata: " + dumps(event) + b"\n\n")
    return out
