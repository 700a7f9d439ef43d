"""The recording proxy: record → replay offline, streaming as it arrives, normalisation, divergence, no keys kept."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from replaykit.capture.proxy import recording_proxy
from replaykit.capture.tape import Tape
from replaykit.cassette.events import Episode, LlmEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.scrub import Scrubber
from replaykit.cassette.store import Store
from replaykit.core.modes import RecordMode
from replaykit.episodes.proxy_session import run_proxy_session
from replaykit.models.reference.server import ReferenceServer

MESSAGES: list[Any] = [  # the wire form: plain dicts
    {"role": "user", "content": "Say something about replay."}
]
CLIENT_CANARY = "sk-client-canary-7f3a9c"
UPSTREAM_CANARY = "sk-upstream-canary-51be02"


# -- helpers -----------------------------------------------------------------------
class RawResponse:
    """A POST over a plain socket, read frame by frame: what exactly went over the wire."""

    def __init__(
        self, base_url: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        parts = urlsplit(base_url)
        data = json.dumps(body).encode()
        head = [
            f"POST {parts.path.rstrip('/')}{path} HTTP/1.1",
            f"Host: {parts.netloc}",
            "Content-Type: application/json",
            f"Content-Length: {len(data)}",
            "Connection: close",
        ]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        self.fp = self.sock.makefile("rb")
        self.status = int(self.fp.readline().split()[1])
        self.headers: dict[str, str] = {}
        while (line := self.fp.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            self.headers[k.strip().lower()] = v.strip()

    def frames(self) -> Iterator[bytes]:
        """The chunk frames of a chunked body, else the whole body once."""
        if self.headers.get("transfer-encoding") != "chunked":
            yield self.fp.read(int(self.headers.get("content-length", "0")))
            return
        while size := int(self.fp.readline().strip(), 16):
            yield self.fp.read(size)
            self.fp.read(2)

    def close(self) -> None:
        self.sock.close()


def raw_post(
    base_url: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], list[bytes]]:
    resp = RawResponse(base_url, path, body, headers)
    try:
        return resp.status, resp.headers, list(resp.frames())
    finally:
        resp.close()


class FakeUpstream(ThreadingHTTPServer):
    """A tiny OpenAI-like SSE upstream: 3 events then [DONE]; optionally waits before the rest."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _FakeHandler)
        self.release = threading.Event()
        self.slow = False
        self.seen_auth: list[str] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeUpstream

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.seen_auth.append(self.headers.get("Authorization", ""))
        events = [
            f'data: {{"n": {i}, "echo": "{body.get("model")}", "note": "key {UPSTREAM_CANARY}"}}\n\n'.encode()
            for i in range(3)
        ]
        events.append(b"data: [DONE]\n\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, event in enumerate(events):
            if i == 1 and self.server.slow:
                self.server.release.wait(15)
            self.wfile.write(f"{len(event):X}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture(scope="module")
def reference() -> Iterator[ReferenceServer]:
    with ReferenceServer() as srv:
        yield srv


@pytest.fixture()
def fake() -> Iterator[FakeUpstream]:
    srv = FakeUpstream()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def _client(url: str) -> Any:  # raw dict messages: the wire form, untyped
    return openai.OpenAI(base_url=url, api_key=CLIENT_CANARY, max_retries=0)


def _calls(url: str) -> list[Any]:
    """Chat (JSON and SSE) and Responses (SSE) calls through an openai client; what the client saw."""
    llm = _client(url)
    seen: list[Any] = [
        llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=1).model_dump()
    ]
    stream = llm.chat.completions.create(model="reference-strong", messages=MESSAGES, seed=2, stream=True)
    seen.append([c.model_dump() for c in stream])
    with llm.responses.stream(model="reference-oracle", input="Say something about replay.") as events:
        seen.append([e.type for e in events])
    return seen


# -- tests -------------------------------------------------------------------------
def test_record_then_replay_with_upstream_stopped_gives_same_bytes_and_chunks() -> None:
    tape = Tape("proxy")
    with ReferenceServer() as upstream:
        with recording_proxy(tape, upstream.base_url, api_key="sk-reference") as url:
            recorded_view = _calls(url)
            status, headers, live_frames = raw_post(
                url, "/chat/completions", {"model": "reference-weak", "messages": MESSAGES, "stream": True}
            )
    assert [e.path for e in tape.llm_events] == [
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/chat/completions",
    ]
    sse = tape.events[3]
    assert isinstance(sse, LlmEvent) and len(sse.chunks) > 3 and sse.split_chunks() == live_frames
    replay = Tape("proxy", recorded=list(tape.events))
    with recording_proxy(replay, None) as url:  # the upstream is gone: only the tape answers
        assert _calls(url) == recorded_view
        status2, headers2, frames = raw_post(
            url, "/chat/completions", {"model": "reference-weak", "messages": MESSAGES, "stream": True}
        )
    assert (status2, headers2["content-type"], frames) == (status, headers["content-type"], live_frames)
    assert replay.divergence is None and replay.cursor == 4
    assert replay.digest == tape.digest


def test_sse_is_relayed_chunk_by_chunk_while_recording(fake: FakeUpstream) -> None:
    fake.slow = True  # the upstream holds the rest of its stream until released
    tape = Tape("slow")
    with recording_proxy(tape, fake.base_url) as url:
        start = time.monotonic()
        resp = RawResponse(url, "/chat/completions", {"model": "m", "stream": True})
        frames = resp.frames()
        first = next(frames)
        waited = time.monotonic() - start
        assert resp.status == 200 and first.startswith(b'data: {"n": 0')
        assert waited < 5 and not fake.release.is_set()  # the client saw chunk 1 before the upstream finished
        fake.release.set()
        rest = list(frames)
        resp.close()
    assert [first, *rest] == tape.llm_events[0].split_chunks() and len(rest) == 3


def test_volatile_uuids_and_timestamps_are_normalised(reference: ReferenceServer) -> None:
    def body(run: str, when: str, ms: int) -> dict[str, Any]:
        return {
            "model": "reference-strong",
            "messages": [
                {"role": "user", "content": f"session {run} started {when}. Say something about replay."}
            ],
            "metadata": {"session_id": run, "created_at": ms},
        }

    rules = ("uuids", "timestamps")
    tape = Tape("volatile")
    with recording_proxy(tape, reference.base_url, rules=rules) as url:
        raw_post(
            url,
            "/chat/completions",
            body("0b5c7e1e-1111-4c1c-9a7e-2f0d3c1e9a01", "2026-01-02T03:04:05Z", 1_700_000_000_123),
        )
    form = tape.llm_events[0].request_form()
    assert form["body"]["metadata"] == {"session_id": "<uuid:0>", "created_at": "<timestamp>"}
    assert "<uuid:0> started <timestamp>" in form["body"]["messages"][0]["content"]
    replay = Tape("volatile", recorded=list(tape.events))
    with recording_proxy(replay, None, rules=rules) as url:
        status, _, frames = raw_post(
            url,
            "/chat/completions",
            body("9d2e4f6a-2222-4b2b-8c3d-7e6f5a4b3c2d", "2027-05-06T07:08:09.5+02:00", 1_800_000_000_999),
        )
    assert status == 200 and b"".join(frames) == tape.llm_events[0].content and replay.divergence is None
    strict = Tape("volatile", recorded=list(tape.events))
    with recording_proxy(strict, None) as url:  # no rules: the same request diverges
        assert (
            raw_post(
                url,
                "/chat/completions",
                body("9d2e4f6a-2222-4b2b-8c3d-7e6f5a4b3c2d", "2026-01-02T03:04:05Z", 1),
            )[0]
            == 409
        )


def test_divergence_gets_an_error_naming_it_with_the_normalised_diff(reference: ReferenceServer) -> None:
    tape = Tape("div")
    with recording_proxy(tape, reference.base_url, rules=("uuids",)) as url:
        _client(url).chat.completions.create(
            model="reference-strong",
            messages=[{"role": "user", "content": "id 0b5c7e1e-1111-4c1c-9a7e-2f0d3c1e9a01: hello"}],
        )
    replay = Tape("div", recorded=list(tape.events))
    with recording_proxy(replay, None, rules=("uuids",)) as url:
        changed = {
            "model": "reference-strong",
            "messages": [{"role": "user", "content": "id 9d2e4f6a-2222-4b2b-8c3d-7e6f5a4b3c2d: goodbye"}],
        }
        status, _, frames = raw_post(url, "/chat/completions", changed)
        error = json.loads(b"".join(frames))["error"]
        again = raw_post(url, "/chat/completions", changed)[0]
        extra = raw_post(url, "/chat/completions", changed)[0]
    assert (
        status == 409
        and error["type"] == "replaykit_divergence"
        and "diverged at event 0" in error["message"]
    )
    assert (
        '-        "content": "id <uuid:0>: hello",' in error["diff"]
        and '+        "content": "id <uuid:0>: goodbye",' in error["diff"]
    )
    assert (
        replay.divergence is not None and replay.divergence.report["position"] == 0 and again == extra == 409
    )
    with pytest.raises(openai.APIStatusError) as info:  # what a client sees
        with recording_proxy(Tape("div", recorded=list(tape.events)), None) as url:
            _client(url).chat.completions.create(model="reference-strong", messages=MESSAGES)
    assert info.value.status_code == 409 and "replay divergence" in str(info.value)


def test_a_request_past_the_end_of_the_recording_is_refused(reference: ReferenceServer) -> None:
    tape = Tape("end")
    with recording_proxy(tape, reference.base_url) as url:
        raw_post(url, "/chat/completions", {"model": "reference-strong", "messages": MESSAGES})
    replay = Tape("end", recorded=list(tape.events))
    with recording_proxy(replay, None) as url:
        assert (
            raw_post(url, "/chat/completions", {"model": "reference-strong", "messages": MESSAGES})[0] == 200
        )
        status, _, frames = raw_post(
            url, "/chat/completions", {"model": "reference-strong", "messages": MESSAGES}
        )
    assert status == 409 and b"the end of the recording" in b"".join(frames)


def test_no_api_key_reaches_the_store_and_the_upstream_gets_the_configured_key(
    fake: FakeUpstream, tmp_path: Path
) -> None:
    tape = Tape("keys")
    with recording_proxy(tape, fake.base_url, Scrubber(), api_key=UPSTREAM_CANARY) as url:
        _, _, frames = raw_post(
            url,
            "/chat/completions",
            {"model": "m", "stream": True, "note": CLIENT_CANARY},
            {"Authorization": f"Bearer {CLIENT_CANARY}"},
        )
    assert fake.seen_auth == [
        f"Bearer {UPSTREAM_CANARY}"
    ]  # forwarded: the configured key, never the client's
    assert UPSTREAM_CANARY.encode() in b"".join(
        frames
    )  # relayed as the upstream sent it (recording is transparent)
    assert all(
        UPSTREAM_CANARY.encode() not in e.content for e in tape.events if isinstance(e, LlmEvent)
    )  # never kept
    store = Store(tmp_path / "store")
    key = CassetteKey("", "keys", "", ModelId("", fake.base_url), 0, "", kind="proxy")
    store.put_episode(Episode(key, tape.events, {}))
    store.close()
    blob = b"".join(p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert b"<secret:" in blob
    for canary in (CLIENT_CANARY, UPSTREAM_CANARY):
        assert canary.encode() not in blob


def test_models_pass_through_while_recording_and_come_from_the_tape_while_replaying(
    reference: ReferenceServer,
) -> None:
    tape = Tape("models")
    with recording_proxy(tape, reference.base_url) as url:
        live = {m.id for m in _client(url).models.list()}
        _client(url).chat.completions.create(model="reference-weak", messages=MESSAGES)
    assert {"reference-weak", "reference-strong"} <= live and len(tape.events) == 1
    with recording_proxy(Tape("models", recorded=list(tape.events)), None) as url:
        assert [m.id for m in _client(url).models.list()] == ["reference-weak"]


def test_proxy_session_records_into_the_store_and_replays(reference: ReferenceServer, tmp_path: Path) -> None:
    def session(mode: str, upstream: str | None) -> dict[str, Any]:
        stop, urls = threading.Event(), []
        result: dict[str, Any] = {}

        def ready(url: str, kind: str) -> None:
            urls.append((url, kind))
            _client(url).chat.completions.create(model="reference-strong", messages=MESSAGES, seed=4)
            stop.set()

        def work() -> None:  # a Store belongs to the thread that opened it
            result.update(
                run_proxy_session(
                    Store(tmp_path / "store"),
                    "demo",
                    upstream,
                    RecordMode(mode),
                    ("uuids",),
                    on_ready=ready,
                    stop=stop,
                )
            )

        worker = threading.Thread(target=work)
        worker.start()
        worker.join(30)
        return result

    recorded = session("once", reference.base_url)
    assert recorded["mode"] == "record" and recorded["llm_calls"] == 1
    row = Store(tmp_path / "store").cassette_row(recorded["cassette_id"])
    assert (row["kind"], row["task_id"], row["n_llm"]) == ("proxy", "demo", 1)
    replayed = session("none", None)
    assert (
        replayed["mode"] == "replay"
        and replayed["identical"]
        and replayed["replayed_digest"] == recorded["digest"]
    )
    again = session("once", reference.base_url)  # once: the session exists, so it is replayed
    assert again["mode"] == "replay" and again["identical"]


def test_cli_proxy_writes_the_episode_on_sigterm(reference: ReferenceServer, tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "replaykit.cli",
        "proxy",
        "--upstream",
        reference.base_url,
        "--name",
        "cli-demo",
        "--store",
        str(tmp_path / "store"),
        "--rule",
        "uuids",
        "--json",
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "400"}
    )
    try:
        line = proc.stderr.readline()  # type: ignore[union-attr]
        url = re.search(r"(http://\S+/v1)", line).group(1)  # type: ignore[union-attr]
        _client(url).chat.completions.create(model="reference-strong", messages=MESSAGES)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["mode"] == "record" and report["llm_calls"] == 1
    assert Store(tmp_path / "store").get_episode(report["cassette_id"]).digest == report["digest"]
