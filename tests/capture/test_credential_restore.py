"""A reply that contains the client's own key replays as recorded.

The stored copy holds ``<secret:client_authorization>`` (or ``<secret:api_key>``) in place
of the key; when the replaying client presents a key, that placeholder is filled with it
again, so the agent sees what it saw while recording (and its next request, which quotes
the reply, matches). A client that presents no key (or a placeholder) gets the scrubbed
text. Real servers on loopback: an upstream that echoes the user's message, the proxy
(``replaykit proxy`` in a subprocess) and the in-process recorder.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from replaykit.capture.recorder import episode_cassette
from replaykit.capture.tape import Tape
from replaykit.cassette.scrub import Scrubber
from replaykit.core.loopback import LoopbackHandler, LoopbackServer, http_chunk

pytestmark = pytest.mark.e2e

KEY = "sk-client-own-5e7a91c3d2b4"


class Echo(LoopbackServer):
    """Answers a chat completion whose content repeats the last user message (SSE when asked)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EchoHandler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _EchoHandler(LoopbackHandler):
    def _dispatch(self, method: str) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        said = f"you said: {body['messages'][-1]['content']}"
        self.send_response(200)
        if body.get("stream"):
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            delta = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
            choice = {"index": 0, "delta": {"content": said}, "finish_reason": None}
            stream = f"data: {json.dumps({**delta, 'choices': [choice]})}\n\n".encode()
            cut = stream.rfind(b"sk-") + 8 if b"sk-" in stream else len(stream) // 2
            for piece in (stream[:cut], stream[cut:]):  # an HTTP chunk boundary inside the key
                self.wfile.write(http_chunk(piece))
            self.wfile.write(http_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            return
        message = {"role": "assistant", "content": said}
        data = json.dumps(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        ).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def echo() -> Iterator[Echo]:
    server = Echo()
    yield server
    server.shutdown()
    server.server_close()


def post(base_url: str, body: dict[str, Any], key: str) -> bytes:
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    conn.request("POST", parts.path + "/chat/completions", json.dumps(body), headers)
    data = conn.getresponse().read()
    conn.close()
    return data


def reply_text(data: bytes, streamed: bool) -> str:
    if not streamed:
        return str(json.loads(data)["choices"][0]["message"]["content"])
    text = ""
    for line in data.decode().splitlines():
        if line.startswith("data: {"):
            text += json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
    return text


def conversation(url: str, key: str, streamed: bool, said: str | None = None) -> list[bytes]:
    """Two turns; the second quotes the first reply (which holds the key, or ``said``)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": said or f"remember my key {key}"}]
    first = post(url, {"model": "m", "stream": streamed, "messages": messages}, key)
    messages += [
        {"role": "assistant", "content": reply_text(first, streamed)},
        {"role": "user", "content": "and again"},
    ]
    second = post(url, {"model": "m", "stream": streamed, "messages": messages}, key)
    return [first, second]


def proxy_session(
    store: Path, key: str, streamed: bool, *args: str, said: str | None = None
) -> tuple[dict[str, Any], list[bytes]]:
    argv = [sys.executable, "-m", "replaykit.cli", "proxy", "--name", "echo", "--store", str(store), "--json"]
    proc = subprocess.Popen(
        [*argv, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://\S+/v1)", line)
        assert found, line + proc.stderr.read()
        received = conversation(found.group(1), key, streamed, said)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    return json.loads(out), received


@pytest.mark.parametrize("streamed", [False, True])
def test_proxy_replay_gives_the_client_its_own_key_back(tmp_path: Path, echo: Echo, streamed: bool) -> None:
    store = tmp_path / "store"
    recorded, live = proxy_session(store, KEY, streamed, "--upstream", echo.base_url)
    assert recorded["mode"] == "record" and recorded["llm_calls"] == 2
    assert KEY in reply_text(live[0], streamed)  # the upstream echoed the client's key
    assert not [p for p in store.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    replayed, again = proxy_session(store, KEY, streamed, "--record-mode", "none")
    assert replayed["mode"] == "replay" and replayed["identical"] is True, replayed
    assert again == live  # byte for byte what the client received while recording


def test_in_process_replay_restores_the_presented_key(echo: Echo) -> None:
    tape = Tape("echo")
    messages: list[Any] = [{"role": "user", "content": f"my key {KEY}"}]
    with episode_cassette("echo", tape, Scrubber({"api_key": KEY})):
        client = openai.OpenAI(base_url=echo.base_url, api_key=KEY, max_retries=0)
        live = client.chat.completions.create(model="m", messages=messages).choices[0].message.content
    assert live == f"you said: my key {KEY}"
    assert b"<secret:api_key>" in tape.llm_events[0].content
    for key, expected in ((KEY, live), ("replaykit-offline", "you said: my key <secret:api_key>")):
        replay = Tape("echo", recorded=list(tape.events))
        replay.scrubber = Scrubber({"api_key": KEY})
        with episode_cassette("echo", replay, replay.scrubber):
            offline = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key=key, max_retries=0)
            reply = offline.chat.completions.create(model="m", messages=messages).choices[0].message.content
        assert reply == expected


@pytest.mark.parametrize("streamed", [False, True])
def test_proxy_replay_gives_back_placeholder_text_the_upstream_sent(
    tmp_path: Path, echo: Echo, streamed: bool
) -> None:
    """The upstream's own literal ``<secret:client_authorization>`` reaches the client while
    recording and comes back unchanged on replay, whatever key the replaying client presents
    (issue 38 item 5: it came back as ``<secret:!client_authorization>``)."""
    store = tmp_path / "store"
    planted = "<secret:client_authorization>"
    _, live = proxy_session(store, KEY, streamed, "--upstream", echo.base_url, said=planted)
    assert planted in reply_text(live[0], streamed)
    for key in (KEY, "sk-another-client-7c1d", ""):
        replayed, again = proxy_session(store, key, streamed, "--record-mode", "none", said=planted)
        assert replayed["identical"] is True, (key, replayed)
        assert again == live, key
