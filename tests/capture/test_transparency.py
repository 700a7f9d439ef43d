"""Recording is transparent: the agent gets the upstream's bytes; only what is stored is scrubbed.

A loopback upstream answers with a body that holds placeholder keys and a canary
secret split across SSE chunk boundaries; the recording proxy and the in-process
vcrpy recorder must relay it byte for byte and store it without the secret.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from replaykit.capture.proxy import recording_proxy
from replaykit.capture.recorder import episode_cassette
from replaykit.capture.tape import Tape
from replaykit.cassette.events import LlmEvent
from replaykit.cassette.scrub import Scrubber, is_secret
from replaykit.core.loopback import LoopbackHandler, LoopbackServer, http_chunk

CANARY = "sk-canary-4b1d2e9f0c7a"
PLACEHOLDERS = ["none", "EMPTY", "dummy", "test", "ollama", "sk-no-key-required"]


def sse_frames(text: str, split_at: int) -> list[bytes]:
    """A chat-completion stream whose content is ``text``; the first frame boundary cuts ``text`` at ``split_at``."""

    def frame(piece: str) -> bytes:
        return (
            b"data: "
            + json.dumps({"choices": [{"index": 0, "delta": {"content": piece}}]}).encode()
            + b"\n\n"
        )

    whole = b"".join([frame(text), b"data: [DONE]\n\n"])
    cut = whole.index(text.encode()) + split_at
    return [whole[:cut], whole[cut:]]


class Upstream(LoopbackServer):
    def __init__(self, frames: list[bytes], streamed: bool = True) -> None:
        self.frames = frames
        self.streamed = streamed
        super().__init__(("127.0.0.1", 0), _UpstreamHandler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _UpstreamHandler(LoopbackHandler):
    server: Upstream

    def _dispatch(self, method: str) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        if self.server.streamed:
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for frame in self.server.frames:
                self.wfile.write(http_chunk(frame))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            data = b"".join(self.server.frames)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)


@pytest.fixture()
def upstream_factory() -> Iterator[Any]:
    servers: list[Upstream] = []

    def make(frames: list[bytes], streamed: bool = True) -> Upstream:
        servers.append(Upstream(frames, streamed))
        return servers[-1]

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def post_raw(base_url: str, body: dict[str, Any], key: str) -> bytes:
    """The decoded body exactly as the client receives it."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    conn.request(
        "POST",
        parts.path + "/chat/completions",
        json.dumps(body),
        {"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    data = conn.getresponse().read()
    conn.close()
    return data


def stored(tape: Tape) -> LlmEvent:
    events = [e for e in tape.events if isinstance(e, LlmEvent)]
    assert len(events) == 1
    return events[0]


@pytest.mark.parametrize("key", PLACEHOLDERS)
def test_placeholder_client_keys_are_not_secrets_and_replies_reach_the_agent_unchanged(
    upstream_factory: Any, key: str
) -> None:
    frames = sse_frames(f"echo {key}; echo none", 3)
    upstream = upstream_factory(frames)
    tape = Tape("placeholder")
    with recording_proxy(tape, upstream.base_url) as url:
        received = post_raw(
            url, {"model": "m", "stream": True, "messages": [{"role": "user", "content": f"key {key}"}]}, key
        )
    assert received == b"".join(frames)  # what the upstream sent, byte for byte
    event = stored(tape)
    assert event.content == b"".join(frames) and "<secret:" not in json.dumps(event.body)
    assert not is_secret(key)


@pytest.mark.parametrize("streamed", [True, False])
def test_proxy_relays_a_secret_unchanged_and_stores_the_joined_stream_scrubbed(
    upstream_factory: Any, streamed: bool
) -> None:
    frames = sse_frames(f"the key is {CANARY} ok", 20)  # the canary straddles the first frame boundary
    assert CANARY.encode() not in frames[0] and CANARY.encode() not in frames[1]
    upstream = upstream_factory(frames, streamed)
    tape = Tape("split")
    with recording_proxy(tape, upstream.base_url) as url:
        received = post_raw(
            url, {"model": "m", "stream": streamed, "messages": [{"role": "user", "content": CANARY}]}, CANARY
        )
    assert received == b"".join(frames)  # transparent: the client's own key echoed back reaches it as sent
    event = stored(tape)
    assert CANARY.encode() not in event.content and b"<secret:client_authorization>" in event.content
    assert CANARY not in json.dumps(event.body)
    assert sum(event.chunks) == len(event.content) and all(event.chunks)


def test_in_process_recorder_is_transparent_and_scrubs_the_joined_stream(upstream_factory: Any) -> None:
    frames = sse_frames(f"echo {CANARY} none", 12)  # cut inside the canary
    upstream = upstream_factory(frames)
    tape = Tape("recorder")
    client = openai.OpenAI(base_url=upstream.base_url, api_key=CANARY, max_retries=0)
    with episode_cassette("recorder", tape, Scrubber({"api_key": CANARY, "placeholder": "none"})):
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == f"echo {CANARY} none"  # the harness saw the real reply
    event = stored(tape)
    assert CANARY.encode() not in event.content and b"<secret:api_key>" in event.content
    assert b" none" in event.content  # a placeholder is never a secret
    # replaying serves the stored (scrubbed) bytes with their chunking, offline
    replay = Tape("recorder", recorded=list(tape.events))
    with episode_cassette("recorder", replay):
        offline = openai.OpenAI(base_url=upstream.base_url, api_key="replaykit-offline", max_retries=0)
        stream = offline.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        assert (
            "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            == "echo <secret:api_key> none"
        )


def test_scrubber_cuts_chunks_where_they_were() -> None:
    scrub = Scrubber({"k": CANARY})
    chunks = [b"a" * 5 + CANARY.encode()[:4], CANARY.encode()[4:] + b"b", b"c"]
    out = scrub.chunks(chunks)
    assert out == [b"aaaaa<secret:k>", b"b", b"c"]
    assert scrub.chunks([b"plain", b"", b"text"]) == [b"plain", b"text"]
    assert [is_secret(v) for v in ("none", "sk-no-key-required", "aaaaaaaaaaaa", CANARY)] == [
        False,
        False,
        False,
        True,
    ]
