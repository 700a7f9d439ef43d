"""The token counts an answer's ``usage`` reports (``cassette/events.py``): either API's names,
streamed or not, and a count that is not a number read as none (never a crash)."""

from __future__ import annotations

import json

from replaykit.cassette.events import LlmEvent, event_tokens, usage_count, usage_reports


def answer(*docs: object, stream: bool = False) -> LlmEvent:
    lines = [("data: " if stream else "") + json.dumps(d) for d in docs]
    content = "\n".join(lines).encode()
    return LlmEvent("POST", "/v1/chat/completions", {}, 200, "OK", [], content, [len(content)])


def test_chat_and_responses_usage_streamed_or_not() -> None:
    chat = answer({"usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}})
    streamed = answer(
        {"choices": []}, {"response": {"usage": {"input_tokens": 3, "total_tokens": 4}}}, stream=True
    )
    assert [dict(u) for u in usage_reports(chat)] == [
        {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    ]
    assert [dict(u) for u in usage_reports(streamed)] == [{"input_tokens": 3, "total_tokens": 4}]
    assert event_tokens(chat) == 7 and event_tokens(streamed) == 4


def test_the_first_name_reporting_a_count_and_a_count_that_is_no_number() -> None:
    assert usage_count({"prompt_tokens": 0, "input_tokens": 9}, "prompt_tokens", "input_tokens") == 9
    assert usage_count({"prompt_tokens": 4.0}, "prompt_tokens", "input_tokens") == 4
    assert usage_count({}, "prompt_tokens", "input_tokens") == 0
    assert usage_count({"total_tokens": [1, 2]}, "total_tokens") == 0
    assert usage_count({"total_tokens": {"n": 1}}, "total_tokens") == 0
    assert event_tokens(answer({"usage": {"total_tokens": "many"}})) == 0
