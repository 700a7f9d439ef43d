"""Transcripts: new messages only, streamed replies joined, chat completions and the Responses API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from replaykit.cassette.events import EnvEvent, Episode, GradeEvent, LlmEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.envs.results import Grade, Observation
from replaykit.models.reference.server import ReferenceServer
from replaykit.report.documents import CallTurn, Message, Turn
from replaykit.report.transcript import parse_response, transcript
from tests.cli_runner import cli

REPO = Path(__file__).resolve().parents[2]
INSTRUCTION = (REPO / "envs" / "hello-file" / "instruction.md").read_text()
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def server() -> Any:
    with ReferenceServer(task_dirs=[REPO / "envs" / "hello-file"]) as srv:
        yield srv


def call(server: ReferenceServer, path: str, body: dict[str, Any]) -> LlmEvent:
    resp = httpx.post(server.base_url + path.removeprefix("/v1"), json=body, timeout=30)
    return LlmEvent(
        "POST", path, body, resp.status_code, resp.reason_phrase, [], resp.content, [len(resp.content)]
    )


def only_calls(turns: list[Turn]) -> list[CallTurn]:
    """The turns of an episode of model calls only (failing if any other turn is there)."""
    calls = [t for t in turns if t["kind"] == "call"]
    assert len(calls) == len(turns), [t["kind"] for t in turns]
    return calls


def no_ids(messages: list[Message]) -> list[Any]:
    """Replies without call ids (the server derives them from the request, whose stream flag differs)."""
    return [
        (m["role"], m["content"], [(c["name"], c["arguments"]) for c in m.get("tool_calls", [])])
        for m in messages
    ]


def key() -> CassetteKey:
    return CassetteKey("0" * 40, "hello-file", "d", ModelId("reference-strong", "builtin"), 0, "c")


def chat_episode(server: ReferenceServer, stream: bool) -> Episode:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a shell agent."},
        {"role": "user", "content": INSTRUCTION},
    ]
    events: list[Any] = []
    for _ in range(2):
        body: dict[str, Any] = {
            "model": "reference-strong",
            "messages": list(messages),
            "tools": TOOLS,
            "temperature": 0,
            "seed": 1,
            "stream": stream,
        }
        event = call(server, "/v1/chat/completions", body)
        events.append(event)
        reply = parse_response(event)["messages"][0]
        if not reply.get("tool_calls"):
            break
        tc = reply["tool_calls"][0]
        messages.append(
            {
                "role": "assistant",
                "content": reply["content"],
                "tool_calls": [
                    {
                        "id": tc["id"],
                        "type": "function",
                        "function": {"name": tc["name"], "arguments": tc["arguments"]},
                    }
                ],
            }
        )
        events.append(
            EnvEvent(json.loads(tc["arguments"])["command"], Observation("", "", 0, False), "ab" * 32)
        )
        messages.append(
            {"role": "tool", "tool_call_id": tc["id"], "content": "exit_code: 0\nstdout:\n\nstderr:\n"}
        )
    events.append(GradeEvent(Grade(1.0, True, False, "PASS")))
    return Episode(key(), events)


def test_chat_transcript_shows_new_messages_only_and_joins_streams(server: ReferenceServer) -> None:
    plain, streamed = transcript(chat_episode(server, False)), transcript(chat_episode(server, True))
    calls = [t for t in plain if t["kind"] == "call"]
    assert [m["role"] for m in calls[0]["new"]] == ["system", "user"] and calls[0]["folded"] == 0
    # the second call re-sends system, user and the assistant's tool call: folded; only the tool result is new
    assert calls[1]["folded"] == 3 and [m["role"] for m in calls[1]["new"]] == ["tool"]
    assert calls[0]["reply"][0]["tool_calls"][0]["name"] == "bash"
    assert [t["kind"] for t in plain][:3] == ["call", "env", "call"] and plain[-1]["kind"] == "grade"
    s_calls = [t for t in streamed if t["kind"] == "call"]
    assert all(t["stream"] and isinstance(t["chunks"], int) and t["chunks"] > 2 for t in s_calls)
    # the joined stream carries the same reply as the JSON response
    assert [no_ids(t["reply"]) for t in s_calls] == [no_ids(t["reply"]) for t in calls]
    assert s_calls[0]["system_fingerprint"] == calls[0]["system_fingerprint"] == "fp_replaykit_reference"


def test_responses_api_transcript_streamed_and_json(server: ReferenceServer) -> None:
    rtools = [
        {
            "type": "function",
            "name": "bash",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ]
    out = []
    for stream in (False, True):
        body: dict[str, Any] = {
            "model": "reference-strong",
            "instructions": "Be brief.",
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": INSTRUCTION}]}
            ],
            "tools": rtools,
            "stream": stream,
        }
        first = call(server, "/v1/responses", body)
        reply = parse_response(first)
        fc = reply["messages"][-1]["tool_calls"][0]
        follow = dict(
            body,
            input=body["input"]
            + [
                {"type": "function_call", "call_id": fc["id"], "name": "bash", "arguments": fc["arguments"]},
                {"type": "function_call_output", "call_id": fc["id"], "output": "exit_code: 0"},
            ],
        )
        out.append(transcript(Episode(key(), [first, call(server, "/v1/responses", follow)])))
    plain, streamed = only_calls(out[0]), only_calls(out[1])
    assert [m["role"] for m in plain[0]["new"]] == ["system", "user"]
    assert plain[0]["reply"][-1]["tool_calls"][0]["name"] == "bash"
    assert plain[1]["folded"] == 3 and [m["role"] for m in plain[1]["new"]] == ["tool"]
    assert streamed[0]["stream"] and no_ids(streamed[0]["reply"]) == no_ids(plain[0]["reply"])
    assert no_ids(streamed[1]["reply"]) == no_ids(plain[1]["reply"])


def test_cli_transcript_of_a_recorded_episode(tmp_path: Path) -> None:
    from replaykit.episodes.run import measure
    from replaykit.testing import small_config

    result = measure(small_config(tmp_path, tasks=["fix-config-port"], seeds=[0]))
    cid = result.run.episodes[0].cassette_id
    cmd = ["cassettes", "show", cid[:10], "--transcript", "--store", str(tmp_path / "store")]
    doc = json.loads(cli(*cmd, "--json", check=True).stdout)
    kinds = [t["kind"] for t in doc["turns"]]
    assert kinds[0] == "call" and kinds[-1] == "grade" and "env" in kinds
    calls = [t for t in doc["turns"] if t["kind"] == "call"]
    assert all(c["folded"] > 0 for c in calls[1:])  # history is never shown twice
    envs = [t for t in doc["turns"] if t["kind"] == "env"]
    assert all(len(e["state_digest"]) == 64 for e in envs)
    text = cli(*cmd, check=True).stdout
    assert "earlier message(s) re-sent (folded)" in text and "grade:" in text and envs[0]["action"] in text
