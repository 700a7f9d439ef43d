"""A streamed reply joined into one body: SSE payloads → a ``chat.completion`` or the final
Responses API object, so a transcript (``report/transcript.parse_response``) and a call's facet
(``facets.py``) read streamed and plain replies alike.

The payloads are the endpoint's JSON as sent (``JSON``); what is not the expected shape
(a chunk that is not an object, a ``choices`` that is not a list) is skipped, never raised.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from replaykit.core.records import JSON


def sse_payloads(content: bytes) -> list[JSON]:
    """The JSON of each ``data:`` line (``[DONE]`` and undecodable lines left out)."""
    out: list[JSON] = []
    for line in content.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if not data or data == "[DONE]":
            continue
        try:
            out.append(json.loads(data))
        except ValueError:
            continue
    return out


def _objects(value: JSON) -> list[Mapping[str, JSON]]:
    """The objects of a JSON list (nothing when it is not one)."""
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, dict)]


def _text(value: JSON) -> str:
    return value if isinstance(value, str) else ""


def _add_calls(calls: dict[int, tuple[str, str, str]], deltas: JSON) -> None:
    """Tool-call deltas appended to the calls so far (index → id, name, arguments)."""
    for tc in _objects(deltas):
        index = tc.get("index", len(calls))
        slot = int(index) if isinstance(index, (int, float, str)) else len(calls)
        call_id, name, arguments = calls.get(slot, ("", "", ""))
        fn = tc.get("function")
        fn = fn if isinstance(fn, dict) else {}
        calls[slot] = (
            _text(tc.get("id")) or call_id,
            name + _text(fn.get("name")),
            arguments + _text(fn.get("arguments")),
        )


def join_chat_stream(chunks: list[JSON]) -> dict[str, JSON]:
    """Streamed chat completion chunks → one ``chat.completion``-shaped dict."""
    texts: dict[str, list[str]] = {"content": [], "reasoning_content": [], "refusal": []}
    calls: dict[int, tuple[str, str, str]] = {}  # index → (id, name, arguments) so far
    doc: dict[str, JSON] = {"stream": True, "chunks": len(chunks)}
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        for key in ("id", "model", "system_fingerprint"):
            if chunk.get(key):
                doc[key] = chunk[key]
        if chunk.get("usage"):
            doc["usage"] = chunk["usage"]
        for choice in _objects(chunk.get("choices")):
            delta = choice.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            texts["content"].append(_text(delta.get("content")))
            # reasoning deltas: llama.cpp and DeepSeek say reasoning_content, vLLM reasoning
            texts["reasoning_content"].append(
                _text(delta.get("reasoning_content")) + _text(delta.get("reasoning"))
            )
            texts["refusal"].append(_text(delta.get("refusal")))
            _add_calls(calls, delta.get("tool_calls"))
            if choice.get("finish_reason"):
                doc["finish_reason"] = choice["finish_reason"]
    tool_calls: list[JSON] = [
        {"id": call_id, "function": {"name": name, "arguments": arguments}}
        for call_id, name, arguments in (calls[i] for i in sorted(calls))
    ]
    msg: dict[str, JSON] = {
        "role": "assistant",
        "content": "".join(texts["content"]),
        "tool_calls": tool_calls,
    }
    for key in ("reasoning_content", "refusal"):
        if any(texts[key]):
            msg[key] = "".join(texts[key])
    doc["choices"] = [{"message": msg, "finish_reason": doc.get("finish_reason")}]
    return doc


def join_responses_stream(events: list[JSON]) -> dict[str, JSON]:
    """Streamed Responses API events → the final response object (``response.completed``)."""
    items: dict[int, JSON] = {}
    final: dict[str, JSON] | None = None
    for event in events:
        if not isinstance(event, dict):
            continue
        response = event.get("response")
        if event.get("type") in (
            "response.completed",
            "response.incomplete",
            "response.failed",
        ) and isinstance(response, dict):
            final = dict(response)
        elif event.get("type") == "response.output_item.done":
            index = event.get("output_index", len(items))
            items[int(index) if isinstance(index, (int, float, str)) else len(items)] = event.get("item")
    final = final or {}
    if not final.get("output") and items:
        final["output"] = [items[i] for i in sorted(items)]
    final["stream"] = True
    final["chunks"] = len(events)
    return final
