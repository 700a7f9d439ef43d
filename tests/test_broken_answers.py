"""An answer that is not complete and well formed is an infrastructure failure.

A real loopback endpoint in front of the reference server misbehaves in one way at a
time — a body cut before its Content-Length, an SSE stream cut before ``[DONE]``, a 200
whose body is not JSON, bytes trickling past the call's total deadline — and is then
switched to relay. Through the real CLI: the run stops with one line (exit 1), or with
``--keep-going`` marks the episode infra; nothing is cached, and once the endpoint
recovers everything is recorded afresh (never "reused").
"""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterator, cast
from urllib.parse import urlsplit

import pytest

from replaykit.cassette.store import Store
from replaykit.core.loopback import LoopbackHandler, LoopbackServer
from replaykit.core.modes import RecordMode
from replaykit.models.reference.server import ReferenceServer
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

TASK = str(REPO_ROOT / "envs" / "hello-file")

#: a harness that streams its one call (``stream=True``) and then writes the reply to a file
STREAMING_HARNESS = """
def solve(task, env, llm, ctx):
    chunks = llm.chat.completions.create(
        messages=[{"role": "user", "content": task.instruction}], stream=True, **ctx.llm_kwargs()
    )
    text = "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)
    env.run("printf %s " + repr(text[:20]) + " > reply.txt")
    return text
"""


#: 200 answers in JSON that are no answer (the endpoint's shape check: capture/shapes.py)
SHAPES: dict[str, Any] = {
    "error_object": {"error": {"message": "The server is overloaded", "type": "server_error"}},
    "no_choices": {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m"},
}


class Faulty(LoopbackServer):
    """Misbehaves as ``mode`` says, or relays to the reference server (``mode = "relay"``)."""

    def __init__(self, upstream: str) -> None:
        self.mode = "relay"
        self.calls = 0
        self.upstream = urlsplit(upstream)
        super().__init__(("127.0.0.1", 0), _FaultyHandler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _FaultyHandler(LoopbackHandler):
    server: Faulty

    def _dispatch(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.calls += 1
        mode = self.server.mode
        if mode == "relay":
            up = self.server.upstream
            conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=60)
            conn.request(method, self.path, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            self._head(resp.status, resp.getheader("Content-Type") or "application/json", len(data))
            self.wfile.write(data)
            return
        self.close_connection = True
        if mode == "cut":  # promises 1000 bytes, sends 100, hangs up
            self._head(200, "application/json", 1000)
            self.wfile.write(b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": [' + b" " * 37)
        elif mode == "stream":  # an SSE stream that ends (cleanly) before data: [DONE]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            delta = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
            for word in ("hel", "lo"):
                choice = {"index": 0, "delta": {"content": word}, "finish_reason": None}
                self.wfile.write(f"data: {json.dumps({**delta, 'choices': [choice]})}\n\n".encode())
                self.wfile.flush()
        elif mode == "garbage":  # 200, but the body is an HTML page
            data = b"<html><body>gateway says hello</body></html>"
            self._head(200, "application/json", len(data))
            self.wfile.write(data)
        elif mode in SHAPES:  # 200 and JSON, but no answer: an error object, or no choices
            data = json.dumps(SHAPES[mode]).encode()
            self._head(200, "application/json", len(data))
            self.wfile.write(data)
        elif mode == "error_stream":  # 200, a stream whose one event is an error object
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            error = {"error": {"message": "The server had an error", "type": "server_error"}}
            self.wfile.write(f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n".encode())
        elif mode == "trickle":  # a byte every 50 ms: each read is quick, the whole never ends
            self._head(200, "application/json", 100_000)
            for _ in range(100_000):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.05)

    def _head(self, status: int, ctype: str, length: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        self.end_headers()


@pytest.fixture()
def faulty() -> Iterator[Faulty]:
    with ReferenceServer() as reference:
        server = Faulty(reference.base_url)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            server.close_connections()
            server.server_close()


def streaming_harness(tmp: Path) -> None:
    repo = tmp / "harness"
    repo.mkdir()
    (repo / "harness.py").write_text(STREAMING_HARNESS)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "streaming harness"], check=True)


def config_for(tmp: Path, faulty: Faulty, mode: str, **overrides: Any) -> Path:
    if mode in ("stream", "error_stream"):
        streaming_harness(tmp)
    values = {
        "panel.tasks": [TASK],
        "panel.seeds": [0],
        "model.base_url": faulty.base_url,
        "model.api_key_env": "",
        "model.timeout_s": 3,
        **overrides,
    }
    return write_config(tmp, values)


def stored(tmp: Path) -> int:
    if not (tmp / "store" / "index.db").exists():
        return 0
    return len(Store(tmp / "store").list_cassettes())


EXPECTED = {
    "cut": "peer closed connection without sending complete message body",
    "stream": "the event stream ended before its last event",
    "garbage": "the 200 answer is not JSON",
    "trickle": "longer than its total deadline of 3s (model.timeout_s)",
    "error_object": "the 200 answer carries an error object (server_error: The server is overloaded)",
    "no_choices": "the 200 answer has no choices (its keys: created, id, model, object)",
    "error_stream": "the stream carries an error event (server_error: The server had an error)",
}
ALL = ["cut", "stream", "garbage", "trickle", "error_object", "no_choices", "error_stream"]
NOT_RESULTS = ("error_object", "no_choices", "error_stream")  # 200 answers that are not a result
RECOVERING = [m for m in ALL if m != "trickle"]


@pytest.mark.parametrize("mode", ALL)
def test_broken_answer_stops_the_run_and_nothing_is_cached(tmp_path: Path, faulty: Faulty, mode: str) -> None:
    faulty.mode = mode
    config = config_for(tmp_path, faulty, mode)
    started = time.monotonic()
    proc = cli("run", str(config), timeout=120)
    elapsed = time.monotonic() - started
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(
        f"Error: model endpoint {faulty.base_url} failed on POST /v1/chat/completions"
    )
    assert EXPECTED[mode] in proc.stderr, proc.stderr
    if mode in NOT_RESULTS:  # the server is up and answered: the hint says so, not "is the server up?"
        assert "answered without a result (nothing was graded or cached)" in proc.stderr, proc.stderr
        assert "is the server up" not in proc.stderr, proc.stderr
    assert "0/1" not in proc.stdout and stored(tmp_path) == 0
    if mode == "trickle":  # the deadline ends it (the trickle alone would take 83 minutes)
        assert elapsed < 30, elapsed


@pytest.mark.parametrize("mode", RECOVERING)
def test_broken_answer_is_infra_and_rerecorded_once_the_endpoint_recovers(
    tmp_path: Path, faulty: Faulty, mode: str
) -> None:
    faulty.mode = mode
    config = config_for(tmp_path, faulty, mode)
    bad = cli("run", str(config), "--json", "--keep-going", timeout=120)
    assert bad.returncode == 0, bad.stderr
    doc = json.loads(bad.stdout)
    (episode,) = doc["episodes"]
    assert episode["infra_failure"] and not episode["passed"] and doc["solved"] == 0
    store = Store(tmp_path / "store")
    row = store.cassette_row(episode["cassette_id"])
    assert row["infra_failure"]
    store.close()
    faulty.mode = "relay"  # the endpoint recovers
    good = json.loads(cli("run", str(config), "--json", timeout=120, check=True).stdout)
    assert good["recorded_count"] == 1 and good["reused_count"] == 0
    assert not good["episodes"][0]["infra_failure"]
    again = json.loads(cli("run", str(config), "--json", timeout=120, check=True).stdout)
    assert again["reused_count"] == 1 and again["recorded_count"] == 0


def test_retries_recover_from_one_cut_answer(tmp_path: Path, faulty: Faulty) -> None:
    """``model.max_retries``: a cut answer followed by a good one is an ordinary episode,
    recorded once (the failed attempt leaves nothing), and replays identical."""
    faulty.mode = "cut"
    original = _FaultyHandler._dispatch

    def once_then_relay(self: _FaultyHandler, method: str) -> None:
        original(self, method)
        self.server.mode = "relay"

    _FaultyHandler._dispatch = once_then_relay  # type: ignore[method-assign]
    try:
        config = config_for(tmp_path, faulty, "cut", **{"model.max_retries": 2})
        doc = json.loads(cli("run", str(config), "--json", timeout=120, check=True).stdout)
    finally:
        _FaultyHandler._dispatch = original  # type: ignore[method-assign]
    assert doc["recorded_count"] == 1 and not doc["episodes"][0]["infra_failure"]
    assert faulty.calls >= 2
    replay = cli(
        "replay", doc["run_id"], "--store", str(tmp_path / "store"), "--json", timeout=120, check=True
    )
    assert json.loads(replay.stdout)["identical"] is True, replay.stdout


@pytest.mark.parametrize("mode", RECOVERING)
def test_proxy_session_with_a_broken_answer_is_never_reused(
    tmp_path: Path, faulty: Faulty, mode: str
) -> None:
    """Through the recording proxy (external agents): the broken answer is not kept, the
    client sees a failure, the session is marked, and ``once`` records it again."""
    import openai

    from replaykit.episodes.proxy_session import run_proxy_session

    def session(modes: list[str]) -> tuple[dict[str, Any], list[str]]:
        stop, seen = threading.Event(), []
        result: dict[str, object] = {}

        def ready(url: str, kind: str) -> None:
            client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
            for i, step in enumerate(modes):
                faulty.mode = step
                try:
                    stream = mode in ("stream", "error_stream") and step != "relay"
                    messages: list[Any] = [{"role": "user", "content": f"call {i}"}]
                    if stream:
                        for _ in client.chat.completions.create(
                            model="reference-strong", messages=messages, stream=True
                        ):
                            pass
                    else:
                        client.chat.completions.create(model="reference-strong", messages=messages)
                    seen.append("ok")
                except openai.APIStatusError as exc:
                    seen.append(f"HTTP {exc.status_code}")
                except openai.APIConnectionError:
                    seen.append("cut")
                except openai.APIError:  # a relayed stream's error event (the upstream's bytes)
                    seen.append("error event")
            stop.set()

        def work() -> None:
            result.update(
                run_proxy_session(
                    Store(tmp_path / "store"),
                    "s",
                    faulty.base_url,
                    RecordMode.ONCE,
                    api_key_env="",
                    on_ready=ready,
                    stop=stop,
                )
            )

        thread = threading.Thread(target=work)
        thread.start()
        thread.join(timeout=120)
        return result, seen

    broken, seen = session(["relay", mode])
    assert broken["mode"] == "record" and broken["llm_calls"] == 1 and seen[0] == "ok"
    assert seen[1] in ("HTTP 502", "cut", "error event"), seen
    expected = {"cut": "IncompleteRead(99 bytes read, 901 more expected)"}.get(mode, EXPECTED[mode])
    assert broken["upstream_errors"] and expected in broken["upstream_errors"][0], broken["upstream_errors"]
    recovered, seen = session(["relay", "relay"])  # once: the marked session is recorded again
    assert recovered["mode"] == "record" and recovered["llm_calls"] == 2 and seen == ["ok", "ok"]
    assert not recovered["upstream_errors"]


def test_cassette_an_older_version_stored_with_a_cut_answer_is_rerecorded(
    tmp_path: Path, faulty: Faulty
) -> None:
    """Older versions graded a cut answer (the harness raised the client's APIConnectionError):
    such a cassette is never reused; the next run records it again."""
    from replaykit.cassette.events import ErrorEvent, GradeEvent

    config = config_for(tmp_path, faulty, "relay")
    first = json.loads(cli("run", str(config), "--json", timeout=120, check=True).stdout)
    store = Store(tmp_path / "store")
    episode = store.get_episode(first["episodes"][0]["cassette_id"])
    grade = next(e for e in episode.events if isinstance(e, GradeEvent))
    episode.events = [ErrorEvent("APIConnectionError: Connection error."), grade]  # what was stored then
    store.put_episode(episode)
    store.close()
    again = json.loads(cli("run", str(config), "--json", timeout=120, check=True).stdout)
    assert again["recorded_count"] == 1 and again["reused_count"] == 0
    assert again["episodes"][0]["digest"] == first["episodes"][0]["digest"]


def test_a_proxy_session_whose_only_answer_was_broken_says_why_nothing_is_stored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The end-of-session line names the cause (the upstream's answers), not the client's base_url."""
    from replaykit.render.cassettes import proxy_report

    error = "replaykit proxy: upstream http://x/v1 failed: incomplete answer: " + EXPECTED["error_object"]
    proxy_report(cast(Any, {"name": "s", "mode": "record", "stored": False, "upstream_errors": [error]}))
    said = capsys.readouterr()
    text = said.out + said.err
    assert "nothing stored (no answer was a result: nothing is kept, the next session records again)" in text
    assert "point the client's base_url" not in text and EXPECTED["error_object"] in text
    proxy_report(cast(Any, {"name": "s", "mode": "record", "stored": False, "upstream_errors": []}))
    assert "point the client's base_url at the proxy" in capsys.readouterr().out
