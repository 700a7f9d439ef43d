"""A 2xx answer that is no answer (an error object, the wrong shape) is named, not graded."""

from __future__ import annotations

import json

import pytest

from replaykit.capture.failures import incomplete_answer

JSON_TYPE = [("content-type", "application/json")]
SSE_TYPE = [("content-type", "text/event-stream")]
CHAT = "/v1/chat/completions"
GOOD_CHAT: dict[str, object] = {
    "id": "c",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"content": "hi"}}],
}
GOOD_RESPONSE: dict[str, object] = {
    "id": "r",
    "object": "response",
    "status": "completed",
    "error": None,
    "output": [],
}


def judged(path: str, body: object, headers: list[tuple[str, str]] = JSON_TYPE) -> str | None:
    return incomplete_answer(path, 200, headers, json.dumps(body).encode())


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        (
            CHAT,
            {"error": {"message": "overloaded", "type": "server_error"}},
            "error object (server_error: overloaded)",
        ),
        (CHAT, {"error": "quota exceeded"}, "error object (quota exceeded)"),
        (CHAT, {"id": "c", "object": "chat.completion"}, "has no choices (its keys: id, object)"),
        (CHAT, {"id": "c", "choices": []}, "has no choices"),
        (CHAT, [GOOD_CHAT], "is JSON list, not an object"),
        ("/v1/completions", {"object": "text_completion"}, "has no choices"),
        ("/v1/embeddings", {"object": "list"}, "has no data"),
        ("/v1/responses", {**GOOD_RESPONSE, "status": "failed"}, "status is failed"),
        (
            "/v1/responses",
            {**GOOD_RESPONSE, "error": {"code": "server_error", "message": "x"}},
            "error object",
        ),
        ("/v1/responses", {"id": "r", "object": "response"}, "no output list"),
        ("/v1/messages", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, "busy"),
        ("/v1/models", {"error": {"message": "nope"}}, "error object (nope)"),
    ],
)
def test_a_200_that_is_no_answer_is_named(path: str, body: object, expected: str) -> None:
    problem = judged(path, body)
    assert problem is not None and expected in problem, problem


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, GOOD_CHAT),
        ("/openai/deployments/d/chat/completions?api-version=1", GOOD_CHAT),
        ("/v1/responses", GOOD_RESPONSE),  # error: null is every Responses object's normal state
        ("/v1/responses", {**GOOD_RESPONSE, "status": "incomplete"}),  # max_output_tokens: a result
        ("/v1/embeddings", {"object": "list", "data": [{"embedding": [0.1]}]}),
        ("/v1/models", {"object": "list", "data": []}),  # not an answer endpoint: not judged by shape
        ("/api/status", {"ok": False, "error": "busy"}),  # another API's error field: not OpenAI's
    ],
)
def test_a_well_formed_answer_passes(path: str, body: object) -> None:
    assert judged(path, body) is None


def sse(*events: object) -> bytes:
    return b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)


def test_a_stream_carrying_an_error_event_is_no_answer() -> None:
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "h"}}]}
    error = {"error": {"message": "The server had an error", "type": "server_error"}}
    assert incomplete_answer(CHAT, 200, SSE_TYPE, sse(chunk, "[DONE]")) is None
    problem = incomplete_answer(CHAT, 200, SSE_TYPE, sse(chunk, error, "[DONE]"))
    assert problem == "the stream carries an error event (server_error: The server had an error)"
    failed = {
        "type": "response.failed",
        "response": {**GOOD_RESPONSE, "error": {"code": "x", "message": "m"}},
    }
    problem = incomplete_answer("/v1/responses", 200, SSE_TYPE, sse(failed))
    assert problem == "the stream ended with response.failed (x: m)"
    done = {"type": "response.completed", "response": GOOD_RESPONSE}
    assert incomplete_answer("/v1/responses", 200, SSE_TYPE, sse(done)) is None
