"""The proxy serves many agents at once: 20 concurrent clients (the stock openai
client, one thread each) record and replay 300 exchanges, on the shared ``/v1`` path
(matched by content) and on per-client session paths (``/s/<name>/v1``, in order per
client); a proxy killed with SIGKILL keeps every exchange that completed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from replaykit.capture.conversations import ConversationPlayer, split_session
from replaykit.cassette.events import Event, LlmEvent
from replaykit.cassette.store import Store
from replaykit.core.errors import DivergenceError
from replaykit.core.modes import RecordMode
from replaykit.episodes.proxy_session import run_proxy_session
from replaykit.models.reference.server import ReferenceServer

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


CLIENTS, TURNS = 20, 15


@pytest.fixture(scope="module")
def reference() -> Iterator[ReferenceServer]:
    with ReferenceServer() as server:
        yield server


def _client(url: str) -> Any:  # raw dict messages: the wire form, untyped
    return openai.OpenAI(base_url=url, api_key="sk-agent", max_retries=0, timeout=60)


def _agent(url: str, i: int, turns: int = TURNS, done: Callable[[int, str], None] | None = None) -> list[str]:
    """One agent: a conversation whose history grows every turn."""
    llm = _client(url)
    messages: list[dict[str, str]] = [{"role": "user", "content": f"agent {i}: say something about replay."}]
    replies = []
    for turn in range(turns):
        reply = (
            llm.chat.completions.create(model="reference-strong", messages=messages, seed=i)
            .choices[0]
            .message.content
            or ""
        )
        replies.append(reply)
        if done:
            done(i, reply)
        messages += [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": f"agent {i} turn {turn}: go on."},
        ]
    return replies


def _swarm(url_for: Callable[[int], str]) -> dict[int, list[str]]:
    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = _agent(url_for(i), i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[:3]
    return results


def _session(
    store: Path, mode: str, upstream: str | None, url_for: Callable[[str, int], str]
) -> tuple[dict[str, Any], dict[int, list[str]]]:
    stop = threading.Event()
    report: dict[str, Any] = {}
    seen: dict[int, list[str]] = {}

    def ready(url: str, kind: str) -> None:
        try:
            seen.update(_swarm(lambda i: url_for(url, i)))
        finally:
            stop.set()

    def work() -> None:
        report.update(
            run_proxy_session(Store(store), "swarm", upstream, RecordMode(mode), on_ready=ready, stop=stop)
        )

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(600)
    return report, seen


@pytest.mark.parametrize("paths", ["shared", "sessions"])
def test_twenty_concurrent_clients_record_and_replay_300_of_300(
    reference: ReferenceServer, tmp_path: Path, paths: str
) -> None:
    def url_for(url: str, i: int) -> str:
        return url if paths == "shared" else url.replace("/v1", f"/s/agent-{i}/v1")

    recorded, live = _session(tmp_path / "store", "once", reference.base_url, url_for)
    assert (
        recorded["mode"] == "record"
        and recorded["llm_calls"] == CLIENTS * TURNS
        and not recorded["store_errors"]
    )
    replayed, again = _session(tmp_path / "store", "none", None, url_for)
    assert replayed["mode"] == "replay" and replayed["served"] == replayed["recorded"] == CLIENTS * TURNS
    assert replayed["identical"] and replayed["divergences"] == 0
    assert again == live  # every agent got its own conversation back


def _event(path: str, content: str, reply: bytes) -> LlmEvent:
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    return LlmEvent(
        method="POST",
        path=path,
        body=body,
        status=200,
        reason="OK",
        headers=[],
        content=reply,
        chunks=[len(reply)],
    )


def test_session_paths_keep_the_order_check_and_shared_paths_match_by_content() -> None:
    recorded = [
        _event("/s/a/v1/chat/completions", "one", b"1"),
        _event("/s/a/v1/chat/completions", "two", b"2"),
        _event("/v1/chat/completions", "x", b"x"),
        _event("/v1/chat/completions", "y", b"y"),
    ]
    player = ConversationPlayer("p", list[Event](recorded))
    assert player.play(recorded[3].request_form()).content == b"y"  # shared path: any order, by content
    with pytest.raises(DivergenceError) as info:  # a session's requests must come in its recorded order
        player.play(recorded[1].request_form())
    assert info.value.report["position"] == 0 and any("one" in line for line in info.value.report["diff"])
    assert player.play(recorded[0].request_form()).content == b"1"
    assert player.play(recorded[1].request_form()).content == b"2"
    assert player.play(recorded[2].request_form()).content == b"x"
    with pytest.raises(DivergenceError):  # nothing plays twice
        player.play(recorded[2].request_form())
    assert player.complete and len(player.divergences) == 2
    assert split_session("/s/agent-3/v1/responses") == ("agent-3", "/v1/responses")


def test_a_sigkilled_proxy_keeps_every_completed_exchange(reference: ReferenceServer, tmp_path: Path) -> None:
    store = tmp_path / "store"
    argv = [
        sys.executable,
        "-m",
        "replaykit.cli",
        "proxy",
        "--upstream",
        reference.base_url,
        "--name",
        "killed",
        "--store",
        str(store),
        "--json",
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "400"}
    )
    completed: list[tuple[int, str]] = []
    lock = threading.Lock()
    enough = threading.Event()

    def done(i: int, reply: str) -> None:
        with lock:
            completed.append((i, reply))
            if len(completed) >= 40:
                enough.set()

    try:
        line = proc.stderr.readline()  # type: ignore[union-attr]
        url = re.search(r"(http://\S+/v1)", line).group(1)  # type: ignore[union-attr]

        def agent(i: int) -> None:
            try:
                _agent(url, i, turns=1000, done=done)
            except openai.APIError:
                pass  # the proxy is gone

        threads = [threading.Thread(target=agent, args=(i,), daemon=True) for i in range(8)]
        for t in threads:
            t.start()
        assert enough.wait(120)
        with lock:  # the exchanges that completed before the kill
            before = list(completed)
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        for t in threads:
            t.join(60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    rows = Store(store).list_cassettes({"kind": "proxy"})
    assert len(rows) == 1
    episode = Store(store).get_episode(rows[0]["id"])
    kept = [json.loads(e.content)["choices"][0]["message"]["content"] for e in episode.llm_events]
    for i, reply in before:
        assert reply in kept, f"agent {i}'s completed exchange was lost"
    assert len(episode.llm_events) >= len(before)
