"""A streamed reply joined into one body (cassette/streams.py): tool-call deltas concatenated
per index, and payloads of an unexpected shape skipped instead of raised."""

from __future__ import annotations

import pytest

from replaykit.cassette.streams import join_chat_stream, join_responses_stream, sse_payloads
from replaykit.core.records import JSON

pytestmark = pytest.mark.unit


def test_chat_deltas_join_per_tool_call_index_and_odd_chunks_are_skipped() -> None:
    chunks = sse_payloads(
        b'data: {"id": "c1", "model": "m", "choices": [{"delta": {"content": "Hel"}}]}\n\n'
        b'data: {"choices": [{"delta": {"content": "lo", "tool_calls": [{"index": 0, "id": "t1",'
        b' "function": {"name": "ba", "arguments": "{\\"a"}}]}}]}\n\n'
        b'data: {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "sh",'
        b' "arguments": "\\": 1}"}}]}, "finish_reason": "tool_calls"}, "not a choice"]}\n\n'
        b'data: [1, 2]\n\ndata: "text"\n\ndata: {"choices": 7, "usage": {"total_tokens": 3}}\n\n'
        b"data: {broken\n\ndata: [DONE]\n\n"
    )
    assert len(chunks) == 6  # the broken line and [DONE] are not payloads
    doc = join_chat_stream(chunks)
    assert doc["chunks"] == 6 and doc["id"] == "c1" and doc["usage"] == {"total_tokens": 3}
    assert doc["choices"] == [
        {
            "message": {
                "role": "assistant",
                "content": "Hello",
                "tool_calls": [{"id": "t1", "function": {"name": "bash", "arguments": '{"a": 1}'}}],
            },
            "finish_reason": "tool_calls",
        }
    ]


def test_responses_events_give_the_final_object_or_the_done_items_in_order() -> None:
    items: list[JSON] = [
        {"type": "response.output_item.done", "output_index": 1, "item": {"type": "message", "content": "b"}},
        {"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning"}},
        "not an event",
    ]
    doc = join_responses_stream(items)
    assert doc == {
        "output": [{"type": "reasoning"}, {"type": "message", "content": "b"}],
        "stream": True,
        "chunks": 3,
    }
    final: JSON = {"type": "response.completed", "response": {"id": "r", "output": [{"type": "message"}]}}
    assert join_responses_stream([*items, final])["output"] == [{"type": "message"}]
