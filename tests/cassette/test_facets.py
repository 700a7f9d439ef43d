"""Every model call classified from its bytes (cassette/facets.py, issue 37 item 6): chat
completions and the Responses API, JSON and streamed, and the facet that ended an episode."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replaykit.cassette.events import EnvEvent, Event, LlmEvent
from replaykit.cassette.facets import call_facet, ended_by, facet_counts, moved
from replaykit.envs.results import Observation

BASH = {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [BASH]}


def event(answer: Any, body: Any = CHAT, status: int = 200, path: str = "/v1/chat/completions") -> LlmEvent:
    content = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
    return LlmEvent("POST", path, body, status, "OK", [], content, [len(content)])


def chat(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    ("answer", "facet"),
    [
        (chat({"role": "assistant", "content": "Done."}), "stop"),
        (chat({"role": "assistant", "content": "I'll ru"}, "length"), "length"),
        (chat({"role": "assistant", "content": ""}), "empty"),
        (chat({"role": "assistant", "content": None}), "empty"),
        (chat({"role": "assistant", "content": "  \n"}), "empty"),
        (
            chat({"role": "assistant", "content": "", "reasoning_content": "Let me think..."}),
            "reasoning_only",
        ),
        (chat({"role": "assistant", "content": None, "refusal": "I can't help with that."}), "refusal"),
        (chat({"role": "assistant", "content": ""}, "content_filter"), "refusal"),
        (
            chat(
                {"role": "assistant", "content": "", "tool_calls": [call("bash", '{"command": "ls"}')]},
                "tool_calls",
            ),
            "tool_calls",
        ),
        (
            chat(
                {"role": "assistant", "content": "", "tool_calls": [call("bash", '{"command": "ls"')]},
                "tool_calls",
            ),
            "malformed_tool_call",
        ),
        (
            chat({"role": "assistant", "content": "", "tool_calls": [call("bash", '"ls"')]}, "tool_calls"),
            "malformed_tool_call",
        ),
        (
            chat({"role": "assistant", "content": "", "tool_calls": [call("python", "{}")]}, "tool_calls"),
            "malformed_tool_call",
        ),
        (chat({"role": "assistant", "content": "", "tool_calls": [call("bash", "{}")]}, "length"), "length"),
    ],
)
def test_chat_completions(answer: dict[str, Any], facet: str) -> None:
    assert call_facet(event(answer)) == facet


def test_a_tool_call_when_no_tool_was_offered_is_malformed() -> None:
    answer = chat({"role": "assistant", "content": "", "tool_calls": [call("bash", "{}")]}, "tool_calls")
    assert call_facet(event(answer, {"messages": []})) == "malformed_tool_call"


def sse(*payloads: Any) -> bytes:
    return b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in payloads) + b"data: [DONE]\n\n"


def delta(d: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def test_streamed_chat_chunks_are_joined_first() -> None:
    cut = sse(delta({"role": "assistant"}), delta({"content": "I'll"}), delta({"content": " ru"}, "length"))
    assert call_facet(event(cut)) == "length"
    split = sse(
        delta({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "bash", "arguments": '{"comm'}}]}),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": 'and": "ls"}'}}]}, "tool_calls"),
    )
    assert call_facet(event(split)) == "tool_calls"
    broken = sse(
        delta(
            {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "bash", "arguments": "{"}}]},
            "tool_calls",
        )
    )
    assert call_facet(event(broken)) == "malformed_tool_call"
    thinking = sse(delta({"reasoning_content": "hmm"}), delta({"content": ""}, "stop"))
    assert call_facet(event(thinking)) == "reasoning_only"
    assert call_facet(event(sse(delta({"role": "assistant"}), delta({}, "stop")))) == "empty"


RESPONSES_BODY = {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "exec_command"}]}


def response(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"object": "response", "status": "completed", "output": output, **extra}


@pytest.mark.parametrize(
    ("answer", "facet"),
    [
        (response([{"type": "message", "content": [{"type": "output_text", "text": "Done."}]}]), "stop"),
        (
            response([{"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "ls"}'}]),
            "tool_calls",
        ),
        (
            response([{"type": "function_call", "name": "exec_command", "arguments": "{"}]),
            "malformed_tool_call",
        ),
        (response([{"type": "function_call", "name": "shell", "arguments": "{}"}]), "malformed_tool_call"),
        (response([{"type": "reasoning", "summary": []}]), "reasoning_only"),
        (response([]), "empty"),
        (response([{"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}]), "refusal"),
        (
            response([], status="incomplete", incomplete_details={"reason": "max_output_tokens"}),
            "length",
        ),
    ],
)
def test_the_responses_api(answer: dict[str, Any], facet: str) -> None:
    assert call_facet(event(answer, RESPONSES_BODY, path="/v1/responses")) == facet


def test_a_streamed_response_is_read_from_its_final_event() -> None:
    final = response([{"type": "function_call", "name": "exec_command", "arguments": "{}"}])
    stream = sse(
        {"type": "response.created", "response": {}}, {"type": "response.completed", "response": final}
    )
    assert call_facet(event(stream, RESPONSES_BODY, path="/v1/responses")) == "tool_calls"


def test_no_answer_has_no_facet() -> None:
    assert call_facet(event({"error": {"message": "overloaded"}}, status=500)) is None
    assert call_facet(event({"error": {"message": "overloaded"}})) is None
    assert call_facet(event(b"<html>not json</html>")) is None


def test_counts_what_ended_an_episode_and_how_counts_moved() -> None:
    act = EnvEvent("ls", Observation("", "", 0), "d")
    calls: list[Event] = [
        event(chat({"role": "assistant", "content": "", "tool_calls": [call("bash", "{}")]}, "tool_calls")),
        act,
        event(chat({"role": "assistant", "content": "x"}, "length")),
        act,
        event(chat({"role": "assistant", "content": ""})),
    ]
    assert facet_counts(calls) == {"tool_calls": 1, "length": 1, "empty": 1}
    assert ended_by(calls) == "empty"
    assert ended_by(calls[:-1]) is None  # an action followed the cut call
    assert ended_by(calls[:1]) is None  # a good call ended it
    assert moved({"length": 14, "tool_calls": 30}, {"length": 2, "empty": 1}) == "length 14 → 2 · empty 0 → 1"
