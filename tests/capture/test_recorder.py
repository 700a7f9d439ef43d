"""The vcrpy episode recorder: position matching, volatile headers, chunks, secrets, offline."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from replaykit.capture.recorder import episode_cassette
from replaykit.capture.tape import Tape
from replaykit.cassette.scrub import Scrubber
from replaykit.core.errors import DivergenceError
from replaykit.models.reference.server import ReferenceServer

MESSAGES: list[Any] = [  # the wire form: plain dicts
    {"role": "user", "content": "Say something about replay."}
]


@pytest.fixture(scope="module")
def server() -> Iterator[ReferenceServer]:
    with ReferenceServer() as srv:
        yield srv


def client(base_url: str, **headers: str) -> Any:  # raw dict messages: the wire form, untyped
    return openai.OpenAI(
        base_url=base_url, api_key="sk-test-key-123456", max_retries=0, default_headers=headers or None
    )


def record(server: ReferenceServer, calls: int = 2, **headers: str) -> Tape:
    tape = Tape("test")
    with episode_cassette("test", tape):
        llm = client(server.base_url, **headers)
        for i in range(calls):
            llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=i)
    return tape


def test_replay_serves_recorded_responses_in_order(server: ReferenceServer) -> None:
    tape = record(server)
    replay = Tape("test", recorded=list(tape.events))
    with episode_cassette("test", replay):
        llm = client("http://127.0.0.1:9/v1")
        first = llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=0)
        second = llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=1)
    assert first.id != second.id  # responses depend on the seed: served by position, not by body alone
    assert replay.digest == tape.digest


def test_volatile_headers_do_not_affect_matching(server: ReferenceServer) -> None:
    volatile = {"x-stainless-retry-count": "0", "x-request-trace": "abc"}
    tape = record(server, 2, **volatile)
    replay = Tape("test", recorded=list(tape.events))
    with episode_cassette("test", replay):
        llm = client(
            "http://127.0.0.1:9/v1",
            **{"x-stainless-retry-count": "7", "x-request-trace": "zzz", "user-agent": "other/9"},
        )
        for i in range(2):
            llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=i)
    assert replay.divergence is None
    assert replay.digest == tape.digest


def test_request_not_recorded_is_an_error_naming_it(server: ReferenceServer) -> None:
    tape = record(server, calls=1)
    replay = Tape("ep-1", recorded=list(tape.events))
    with episode_cassette("ep-1", replay):
        llm = client("http://127.0.0.1:9/v1")
        llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=0)
        with pytest.raises(DivergenceError, match=r"request POST /v1/chat/completions was not recorded"):
            llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=1)


def test_altered_request_reports_position_and_diff(server: ReferenceServer) -> None:
    tape = record(server, calls=2)
    replay = Tape("ep-2", recorded=list(tape.events))
    with episode_cassette("ep-2", replay):
        llm = client("http://127.0.0.1:9/v1")
        llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=0)
        with pytest.raises(DivergenceError) as info:
            llm.chat.completions.create(
                model="reference-strong", messages=[{"role": "user", "content": "different"}], seed=1
            )
    report = info.value.report
    assert report["position"] == 1 and report["kind"] == "llm"
    assert any(line.startswith("+") and "different" in line for line in report["diff"])
    assert any(line.startswith("-") and "Say something" in line for line in report["diff"])


def test_streaming_replays_same_bytes_and_chunks(server: ReferenceServer) -> None:
    def stream_chunks(base_url: str) -> list[bytes]:
        llm = client(base_url)
        with llm.chat.completions.with_streaming_response.create(
            model="reference-strong", messages=MESSAGES, seed=3, stream=True
        ) as response:
            return list(response.http_response.iter_raw())

    tape = Tape("s")
    with episode_cassette("s", tape):
        recorded_chunks = stream_chunks(server.base_url)
    assert len(recorded_chunks) > 3 and recorded_chunks[-1].rstrip().endswith(b"data: [DONE]")
    event = tape.llm_events[0]
    assert event.split_chunks() == recorded_chunks

    replay = Tape("s", recorded=list(tape.events))
    with episode_cassette("s", replay):
        replayed_chunks = stream_chunks("http://127.0.0.1:9/v1")
    assert replayed_chunks == recorded_chunks


def test_streaming_parses_identically_on_replay(server: ReferenceServer) -> None:
    def text(base_url: str) -> str:
        llm = client(base_url)
        stream = llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=3, stream=True)
        return "".join((c.choices[0].delta.content or "") for c in stream if c.choices)

    tape = Tape("t")
    with episode_cassette("t", tape):
        live = text(server.base_url)
    replay = Tape("t", recorded=list(tape.events))
    with episode_cassette("t", replay):
        assert text("http://127.0.0.1:9/v1") == live


def test_replay_needs_no_socket(server: ReferenceServer, monkeypatch: pytest.MonkeyPatch) -> None:
    tape = record(server, calls=2)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("replay opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    replay = Tape("test", recorded=list(tape.events))
    with episode_cassette("test", replay):
        llm = client("http://127.0.0.1:9/v1")
        for i in range(2):
            llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=i)
    assert replay.digest == tape.digest


def test_secrets_are_scrubbed_from_requests_and_responses(server: ReferenceServer) -> None:
    canary = "canary-secret-7f3a9"
    tape = Tape("sec")
    with episode_cassette("sec", tape, Scrubber({"TOKEN": canary})):
        client(server.base_url).chat.completions.create(
            model="reference-strong", messages=[{"role": "user", "content": f"my token is {canary}"}]
        )
    event = tape.llm_events[0]
    assert canary not in str(event.body) and "<secret:TOKEN>" in str(event.body)
    assert canary.encode() not in event.content
