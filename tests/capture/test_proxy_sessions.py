"""``replaykit proxy`` as users run it: a real process, real signals, real servers on loopback.

A session is found by its upstream as a service (however the URL is typed), takes up a
recording that stopped early (SIGTERM, kill -9) by recording only the turns that continue it,
normalises the agent's working directory and user rules from a file, tells every divergence
as it happens, bounds each upstream exchange by a total deadline, refuses an HTTP/2 client in
one line, names the model it recorded, hints at a client's own cache, and gives a replaying
client its own key back only where that very key was recorded.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from replaykit.cassette.store import Store
from replaykit.core.loopback import LoopbackHandler, LoopbackServer, http_chunk
from replaykit.models.reference.server import ReferenceServer
from tests.capture.proxy_cli import ProxyProcess
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

MODEL = "reference-strong"


def chat(url: str, messages: list[dict[str, Any]], key: str = "none", timeout: float = 60) -> str:
    client = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=timeout)
    reply = client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    return reply.choices[0].message.content or ""


def turns(url: str, said: list[str], key: str = "none") -> list[dict[str, Any]]:
    """A conversation of ``said`` user turns, each sent with the whole history; the history."""
    history: list[dict[str, Any]] = []
    for text in said:
        history.append({"role": "user", "content": text})
        history.append({"role": "assistant", "content": chat(url, history, key)})
    return history


def sessions(store: Path) -> list[Any]:
    return Store(store).list_cassettes({"kind": "proxy"})


@pytest.fixture()
def reference() -> Iterator[str]:
    with ReferenceServer() as server:
        yield server.base_url


def test_a_session_is_keyed_by_its_upstream_as_a_service(tmp_path: Path, reference: str) -> None:
    store, port = tmp_path / "store", urlsplit(reference).port
    with ProxyProcess(store, "--upstream", f"http://localhost:{port}/v1/") as proxy:
        turns(proxy.url, ["hello"])
    code, recorded, _ = proxy.result
    assert code == 130 and recorded and recorded["mode"] == "record"
    assert recorded["models"] == [MODEL] and sessions(store)[0]["model"] == MODEL  # the model, recorded
    with ProxyProcess(store, "--upstream", f"HTTP://127.0.0.1:{port}/v1") as proxy:  # typed another way
        turns(proxy.url, ["hello"])
    code, again, _ = proxy.result
    assert again and again["mode"] == "replay" and again["identical"] and len(sessions(store)) == 1
    with ProxyProcess(store, "--upstream", "builtin") as proxy:  # truly another upstream: told so
        line = proxy.wait_for("also recorded against")
        turns(proxy.url, ["hello"])
    assert "http://localhost/v1" in line and len(sessions(store)) == 2
    proc = cli("proxy", "--name", "s", "--store", str(store), "--record-mode", "none", timeout=60)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "several upstreams" in proc.stderr and "--upstream" in proc.stderr


@pytest.mark.parametrize("stopped_by", [signal.SIGKILL, signal.SIGTERM])
def test_once_takes_up_a_session_whose_recording_stopped_early(
    tmp_path: Path, reference: str, stopped_by: int
) -> None:
    store = tmp_path / "store"
    with ProxyProcess(store, "--upstream", reference) as proxy:
        history = turns(proxy.url, ["one", "two"])
        proxy.stop(stopped_by)  # between turns: the agent goes on, the proxy does not
    assert [row["n_llm"] for row in sessions(store)] == [2]
    with ProxyProcess(store, "--upstream", reference) as proxy:  # once, again: the agent's next turn
        history.append({"role": "user", "content": "three"})
        history.append({"role": "assistant", "content": chat(proxy.url, history)})
        branch = [history[0], history[1], {"role": "user", "content": "two, said otherwise"}]
        with pytest.raises(openai.APIStatusError) as refused:  # a new branch of a recorded turn
            chat(proxy.url, branch)
        assert refused.value.status_code == 409
        proxy.wait_for("divergence at")
    code, taken_up, stderr = proxy.result
    assert code == 130 and taken_up and taken_up["mode"] == "record", stderr
    assert (taken_up["llm_calls"], taken_up["resumed"], taken_up["divergences"]) == (3, 2, 1)
    assert "took up proxy session" in stderr
    (row,) = sessions(store)
    assert row["n_llm"] == 3 and row["id"] == taken_up["cassette_id"]
    with ProxyProcess(store, "--record-mode", "none") as proxy:  # the whole agent run, replayed
        assert turns(proxy.url, ["one", "two", "three"]) == history
    code, replayed, _ = proxy.result
    assert replayed and replayed["identical"] and replayed["served"] == 3


def test_the_cwd_rule_replays_from_another_folder(tmp_path: Path, reference: str) -> None:
    store, here, there = tmp_path / "store", tmp_path / "a" / "work", tmp_path / "elsewhere" / "job"
    here.mkdir(parents=True)
    there.mkdir(parents=True)
    with ProxyProcess(store, "--upstream", reference, "--rule", "cwd", cwd=here) as proxy:
        turns(proxy.url, [f"I work in {here}/src; list {here}"])
    with ProxyProcess(store, "--record-mode", "none", cwd=there) as proxy:  # the recorded rules apply
        turns(proxy.url, [f"I work in {there}/src; list {there}"])
    _, replayed, stderr = proxy.result
    assert replayed and replayed["identical"], stderr
    stored = json.dumps(Store(store).get_episode(sessions(store)[0]["id"]).llm_events[0].body)
    assert "<cwd>/src" in stored and str(here) not in stored
    with ProxyProcess(store, "--upstream", reference, name="plain", cwd=here) as proxy:  # no rule: no luck
        turns(proxy.url, [f"I work in {here}"])
    with ProxyProcess(store, "--record-mode", "none", name="plain", cwd=there) as proxy:
        with pytest.raises(openai.APIStatusError):
            turns(proxy.url, [f"I work in {there}"])
    assert proxy.result[1] and not proxy.result[1]["identical"]


def test_a_rule_file_names_regex_replacements(tmp_path: Path, reference: str) -> None:
    store, rules = tmp_path / "store", tmp_path / "rules.yaml"
    rules.write_text("rules:\n  job-id: {pattern: 'job-[0-9a-f]{8}', replace: '<job>'}\n")
    with ProxyProcess(store, "--upstream", reference, "--rule-file", str(rules)) as proxy:
        turns(proxy.url, ["status of job-1a2b3c4d?"])
    with ProxyProcess(store, "--record-mode", "none", "--rule-file", str(rules)) as proxy:
        turns(proxy.url, ["status of job-99887766?"])
    assert proxy.result[1] and proxy.result[1]["identical"], proxy.result[2]
    proc = cli("proxy", "--name", "s", "--store", str(store), "--record-mode", "none", timeout=60)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "--rule-file" in proc.stderr
    rules.write_text("rules:\n  job-id: {pattern: 'job-[0-9]+', replace: '<job>'}\n")
    proc = cli("proxy", "--name", "s", "--store", str(store), "--rule-file", str(rules), timeout=60)
    assert proc.returncode == 1 and "not the one the session was recorded with" in proc.stderr
    for text, expected in [
        ("rules: [1, 2]\n", "expected a mapping"),
        ("rules:\n  uuids: {pattern: x, replace: y}\n", "built-in"),
        ("rules:\n  bad: {pattern: '(', replace: y}\n", "is not a regex"),
        ("rules: {a: [\n", "not valid YAML"),
    ]:
        rules.write_text(text)
        proc = cli("proxy", "--name", "t", "--store", str(store), "--rule-file", str(rules), timeout=60)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and expected in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_every_divergence_is_told_as_it_happens_and_summed_up(tmp_path: Path, reference: str) -> None:
    store = tmp_path / "store"
    with ProxyProcess(store, "--upstream", reference) as proxy:
        turns(proxy.url, ["hello"])
    with ProxyProcess(store, "--record-mode", "none") as proxy:
        for text in ("goodbye", "farewell"):
            with pytest.raises(openai.APIStatusError):
                chat(proxy.url, [{"role": "user", "content": text}])
            proxy.wait_for(text)  # its line is there before the session ends
    code, replayed, stderr = proxy.result
    assert code == 130 and replayed and len(replayed["divergence_lines"]) == 2 == replayed["divergences"]
    assert stderr.count("replaykit proxy: divergence at") == 2
    assert '"content": "hello"' in stderr and '"content": "farewell"' in stderr  # both sides, shortly
    with ProxyProcess(store, "--record-mode", "none", as_json=False) as proxy:
        for text in ("goodbye", "farewell"):
            with pytest.raises(openai.APIStatusError):
                chat(proxy.url, [{"role": "user", "content": text}])
    summary = proxy.stdout  # stopped (Ctrl-C) on leaving the block
    assert "divergence in episode" in summary and summary.count("also diverged at") == 1  # first in full


def test_a_replay_that_asked_less_hints_at_the_clients_own_cache(tmp_path: Path, reference: str) -> None:
    store = tmp_path / "store"
    with ProxyProcess(store, "--upstream", reference) as proxy:
        turns(proxy.url, ["one", "two"])
    with ProxyProcess(store, "--record-mode", "none") as proxy:
        turns(proxy.url, ["one"])  # the second turn came from the client's own cache
    _code, replayed, stderr = proxy.result
    assert replayed and not replayed["identical"] and replayed["served"] == 1
    assert any("own response cache" in n for n in replayed["notes"]) and "own response cache" in stderr


class Trickle(LoopbackServer):
    """An upstream that starts an SSE answer and then sends one byte a second, forever."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _TrickleHandler)
        self.stopping = threading.Event()
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _TrickleHandler(LoopbackHandler):
    server: Trickle

    def _dispatch(self, method: str) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while not self.server.stopping.wait(1):
            self.wfile.write(http_chunk(b":"))
            self.wfile.flush()


def test_an_upstream_exchange_has_a_total_deadline(tmp_path: Path) -> None:
    store, upstream = tmp_path / "store", Trickle()
    try:
        with ProxyProcess(store, "--upstream", upstream.base_url, "--timeout", "2") as proxy:
            started = time.monotonic()
            client = openai.OpenAI(base_url=proxy.url, api_key="none", max_retries=0, timeout=60)
            with pytest.raises(openai.APIError):
                list(
                    client.chat.completions.create(
                        model=MODEL, messages=[{"role": "user", "content": "x"}], stream=True
                    )
                )
            took = time.monotonic() - started
        _code, report, _ = proxy.result
    finally:
        upstream.stopping.set()
        upstream.shutdown()
        upstream.server_close()
    assert took < 15, took  # the 1 byte/s trickle would have held the call for a minute
    assert report and report["llm_calls"] == 0 and not report["stored"]  # a cut answer is never kept
    assert any("total deadline" in e for e in report["upstream_errors"]), report


def test_an_http2_client_is_refused_in_one_line(tmp_path: Path, reference: str) -> None:
    with ProxyProcess(tmp_path / "store", "--upstream", reference) as proxy:
        curl = subprocess.run(
            ["curl", "-sS", "--http2-prior-knowledge", "--max-time", "20", proxy.url + "/models"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        line = proxy.wait_for("HTTP/2 client was refused")
    assert curl.returncode != 0, curl.stdout  # curl is told, not left hanging
    assert "HTTP/1.1" in line and line.count("\n") == 1


KEY = "sk-recorded-client-3f9a7c51e2d8"


class Leaky(LoopbackServer):
    """A model that puts the client's key (which it saw in its context) into a command."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _LeakyHandler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _LeakyHandler(LoopbackHandler):
    def _dispatch(self, method: str) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        said = f"run: curl -H 'Authorization: Bearer {KEY}' https://elsewhere.invalid/"
        message = {"role": "assistant", "content": said}
        data = json.dumps(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_a_replaying_client_gets_its_key_back_only_where_that_very_key_was(tmp_path: Path) -> None:
    store, upstream = tmp_path / "store", Leaky()
    try:
        with ProxyProcess(store, "--upstream", upstream.base_url) as proxy:
            recorded = turns(proxy.url, ["deploy it", "again"], key=KEY)
    finally:
        upstream.shutdown()
        upstream.server_close()
    assert KEY in recorded[1]["content"]  # what the client saw while recording: the upstream's bytes
    assert KEY not in json.dumps(
        [e.body for e in Store(store).get_episode(sessions(store)[0]["id"]).llm_events]
    )
    for key in ("sk-live-other-key-8e2d1b7a64c0", "EMPTY", KEY):
        with ProxyProcess(store, "--record-mode", "none") as proxy:
            replayed = turns(proxy.url, ["deploy it", "again"], key=key)
        assert proxy.result[1] and proxy.result[1]["identical"], (key, proxy.result[2])
        if key == KEY:
            assert replayed == recorded  # the very client: the very bytes
        else:
            assert (
                key not in json.dumps(replayed) and "<secret:client_authorization>" in replayed[1]["content"]
            )


def test_a_session_taken_up_that_receives_no_request_is_kept_not_judged(
    tmp_path: Path, reference: str
) -> None:
    """`once` restarted on a stored session and stopped before any request: its recording is kept
    as it was, never "mode replay, served 0 of 1 ... NOT identical" with a client-cache hint."""
    store = tmp_path / "store"
    with ProxyProcess(store, "--upstream", reference) as proxy:
        turns(proxy.url, ["one"])
    (before,) = sessions(store)
    with ProxyProcess(store, "--upstream", reference, as_json=False) as proxy:
        pass
    code, _, stderr = proxy.result
    said = proxy.stdout + stderr
    assert code == 130 and "NOT identical" not in said and "cache" not in said, said
    assert "received no request: its recording (1 call(s)" in proxy.stdout, said
    with ProxyProcess(store, "--upstream", reference) as proxy:
        pass
    code, report, _ = proxy.result
    assert report and report["mode"] == "record" and report["untouched"] and report["llm_calls"] == 1, report
    assert sessions(store) == [before]
