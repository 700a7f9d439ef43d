"""The pytest plugin matches concurrent requests by content, as the proxy does.

A real loopback upstream echoes each question; a user's test sends 16 questions with
``asyncio.gather`` (recorded on the first run, then replayed offline ten times, the
gather order shuffled differently each time); a 24-request session recorded by the
proxy from six concurrent conversations replays in-process from threads in another order.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest

from replaykit.cassette.store import Store
from replaykit.core.loopback import LoopbackHandler, LoopbackServer
from replaykit.episodes.proxy_session import run_proxy_session
from replaykit.pytest_plugin import replay_cassette

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.e2e

OFFLINE = "http://127.0.0.1:9/v1"  # nothing listens: only a replay can answer


class Echo(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EchoHandler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _EchoHandler(LoopbackHandler):
    def _dispatch(self, method: str) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        turns = sum(1 for m in body["messages"] if m["role"] == "user")
        said = f"answer to {body['messages'][-1]['content']} (turn {turns})"
        data = json.dumps(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": said}, "finish_reason": "stop"}
                ],
            }
        ).encode()
        self.send_response(200)
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


USER_TEST = """
import asyncio, os, random, openai, pytest

@pytest.mark.replaykit(name="gather-16")
def test_gather():
    order = list(range(16))
    random.Random(int(os.environ.get("TRIAL", "0"))).shuffle(order)
    client = openai.AsyncOpenAI(base_url=os.environ["UPSTREAM"], api_key="unused", max_retries=0)

    async def ask(i):
        await asyncio.sleep(0.001 * (i % 3))
        reply = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"question {i}"}]
        )
        return i, reply.choices[0].message.content

    async def main():
        return await asyncio.gather(*(ask(i) for i in order))

    for i, text in asyncio.run(main()):
        assert text == f"answer to question {i} (turn 1)", (i, text)
"""


def test_async_gather_of_16_replays_ten_times_out_of_ten(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, echo: Echo
) -> None:
    store = tmp_path / "store"
    pytester.makepyfile(test_user=USER_TEST)
    args = ("--replaykit-store", str(store), "-p", "no:cacheprovider")
    monkeypatch.setenv("UPSTREAM", echo.base_url)
    pytester.runpytest(*args).assert_outcomes(passed=1)
    (row,) = Store(store).list_cassettes({"kind": "pytest"})
    assert row["n_llm"] == 16
    monkeypatch.setenv("UPSTREAM", OFFLINE)
    outcomes = []
    for trial in range(10):
        monkeypatch.setenv("TRIAL", str(trial + 1))  # a different gather order than the recording's
        result = pytester.runpytest(*args, "--replaykit-record-mode", "none")
        outcomes.append(result.parseoutcomes().get("passed", 0))
    assert outcomes == [1] * 10


def conversation(url: str, who: int) -> list[str]:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    messages: list[Any] = []  # the wire form: plain dicts
    replies = []
    for turn in range(4):
        messages.append({"role": "user", "content": f"agent {who} step {turn}"})
        reply = client.chat.completions.create(model="m", messages=messages).choices[0].message.content
        assert reply is not None
        messages.append({"role": "assistant", "content": reply})
        replies.append(reply)
    return replies


def test_a_24_request_proxy_recording_replays_in_process(tmp_path: Path, echo: Echo) -> None:
    store = Store(tmp_path / "store")
    stop, live = threading.Event(), dict[int, Any]()

    def ready(url: str, mode: str) -> None:
        def drive() -> None:
            with ThreadPoolExecutor(6) as pool:
                live.update(zip(range(6), pool.map(lambda w: conversation(url, w), range(6)), strict=True))
            stop.set()

        threading.Thread(target=drive, daemon=True).start()

    report = run_proxy_session(store, "crowd", echo.base_url, api_key_env="", on_ready=ready, stop=stop)
    assert report["llm_calls"] == 24 and report["cassette_id"] is not None
    for trial in range(3):
        who = list(range(6))
        random.Random(trial).shuffle(who)
        with replay_cassette(store, report["cassette_id"], require_all=True) as replay:
            with ThreadPoolExecutor(6) as pool:
                replayed = dict(zip(who, pool.map(lambda w: conversation(OFFLINE, w), who), strict=True))
        assert replayed == live and replay.played == 24
