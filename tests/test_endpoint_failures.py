"""Endpoint failures are infrastructure failures: never a graded episode, never reused.

Real servers on loopback: the built-in reference server, a gate in front of it that
answers an HTTP error (401/404/500) until it is switched to pass through, and a
refused port. Everything through the real CLI (in-process: tests/cli_runner.py).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest

from replaykit.cassette.events import LlmEvent
from replaykit.cassette.store import Store
from replaykit.core.loopback import LoopbackHandler, LoopbackServer
from replaykit.core.modes import RecordMode
from replaykit.models.reference.server import ReferenceServer
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


GOOD_KEY = "sk-gate-good-7f3a9c21d4e8"
TASKS = [str(REPO_ROOT / "envs" / "hello-file"), str(REPO_ROOT / "envs" / "count-error-lines")]


class Gate(LoopbackServer):
    """Answers ``status`` (an HTTP error) to every call, or relays to the reference server when ``status`` is 0."""

    def __init__(self, upstream: str) -> None:
        self.status = 401
        self.upstream = urlsplit(upstream)
        super().__init__(("127.0.0.1", 0), _GateHandler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _GateHandler(LoopbackHandler):
    server: Gate

    def _dispatch(self, method: str) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status = self.server.status
        if status == 0 and self.headers.get("Authorization") != f"Bearer {GOOD_KEY}":
            status = 401
        if status:
            messages = {
                401: "Incorrect API key provided",
                404: "The model does not exist",
                500: "internal error",
            }
            data = json.dumps({"error": {"message": messages.get(status, "error"), "type": "error"}}).encode()
            self._reply(status, "application/json", data)
            return
        up = self.server.upstream
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=60)
        conn.request(method, self.path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        self._reply(resp.status, resp.getheader("Content-Type") or "application/json", data)

    def _reply(self, status: int, ctype: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def gate() -> Iterator[Gate]:
    with ReferenceServer() as reference:
        server = Gate(reference.base_url)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            server.close_connections()
            server.server_close()


def config_for(tmp: Path, base_url: str, **overrides: Any) -> Path:
    values = {
        "panel.tasks": TASKS,
        "panel.seeds": [0],
        "model.base_url": base_url,
        "model.api_key_env": "GATE_KEY",
        **overrides,
    }
    return write_config(tmp, values)


def stored_cassettes(tmp: Path) -> int:
    if not (tmp / "store" / "index.db").exists():
        return 0
    return len(Store(tmp / "store").list_cassettes())


@pytest.mark.parametrize(
    ("status", "fix"),
    [(401, "check the API key in $GATE_KEY"), (404, "check the model name"), (500, "the server failed")],
)
def test_http_error_stops_the_run_and_nothing_is_cached(
    tmp_path: Path, gate: Gate, status: int, fix: str
) -> None:
    gate.status = status
    config = config_for(tmp_path, gate.base_url)
    proc = cli("run", str(config), env={"GATE_KEY": "sk-gate-bad-000000000000"})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert (
        proc.stderr.startswith(f"Error: model endpoint {gate.base_url} answered HTTP {status}")
        and fix in proc.stderr
    )
    assert stored_cassettes(tmp_path) == 0


def test_fixed_endpoint_rerun_records_instead_of_reusing(tmp_path: Path, gate: Gate) -> None:
    config = config_for(tmp_path, gate.base_url)
    bad = cli("run", str(config), "--json", "--keep-going", env={"GATE_KEY": "sk-gate-bad-000000000000"})
    assert bad.returncode == 0, bad.stderr
    doc = json.loads(bad.stdout)
    assert doc["total"] == 2 and all(e["infra_failure"] and not e["passed"] for e in doc["episodes"])
    gate.status = 0  # the endpoint is fixed (and the right key is set)
    good = cli("run", str(config), "--json", env={"GATE_KEY": GOOD_KEY})
    assert good.returncode == 0, good.stderr
    fixed = json.loads(good.stdout)
    assert fixed["recorded_count"] == 2 and fixed["reused_count"] == 0
    assert not any(e["infra_failure"] for e in fixed["episodes"]) and fixed["solved"] >= 1
    again = json.loads(cli("run", str(config), "--json", env={"GATE_KEY": GOOD_KEY}).stdout)
    assert again["reused_count"] == 2 and again["recorded_count"] == 0


def test_cassette_stored_with_an_endpoint_error_by_an_older_version_is_rerecorded(
    tmp_path: Path, gate: Gate
) -> None:
    gate.status = 0
    config = config_for(tmp_path, gate.base_url)
    first = json.loads(cli("run", str(config), "--json", env={"GATE_KEY": GOOD_KEY}).stdout)
    store = Store(tmp_path / "store")
    victim = first["episodes"][0]["cassette_id"]
    episode = store.get_episode(victim)
    llm = next(e for e in episode.events if isinstance(e, LlmEvent))
    llm.status, llm.reason, llm.content = (
        401,
        "Unauthorized",
        b'{"error": {"message": "Incorrect API key provided"}}',
    )
    store.put_episode(episode)  # what an older replaykit stored: an endpoint error inside a graded episode
    store.close()
    again = json.loads(cli("run", str(config), "--json", env={"GATE_KEY": GOOD_KEY}).stdout)
    assert again["recorded_count"] == 1 and again["reused_count"] == 1
    assert [e["digest"] for e in again["episodes"]] == [e["digest"] for e in first["episodes"]]


def test_refused_connection_is_an_endpoint_failure(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    config = config_for(tmp_path, f"http://127.0.0.1:{port}/v1")
    proc = cli("run", str(config), env={"GATE_KEY": GOOD_KEY})
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert (
        f"Error: model endpoint http://127.0.0.1:{port}/v1 failed on POST /v1/chat/completions" in proc.stderr
    )
    assert "is the server up" in proc.stderr and stored_cassettes(tmp_path) == 0


def test_unknown_model_on_the_builtin_server_is_an_error_not_a_result(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"panel.tasks": TASKS, "panel.seeds": [0]})
    proc = cli("run", str(config), "--model", "reference-strnog")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "answered HTTP 404" in proc.stderr and "'reference-strnog' (model.name)" in proc.stderr
    assert stored_cassettes(tmp_path) == 0


def test_unknown_proposer_model_stops_the_training(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {
            "panel.tasks": TASKS,
            "panel.seeds": [0],
            "train.estimator": {
                "kind": "agentic",
                "backend": {"kind": "openai", "model": "reference-proposr", "base_url": "builtin"},
            },
        },
    )
    proc = cli("train", str(config), "--epochs", "1")
    last = proc.stderr.splitlines()[-1]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert last.startswith("Error: proposer endpoint http://127.0.0.1:") and "answered HTTP 404" in last
    assert "'reference-proposr' (train.estimator.backend.model)" in last
    store = Store(tmp_path / "store")
    assert store.list_cassettes({"kind": "proposal"}) == []  # the failed proposal was not cached


def test_unset_api_key_env_is_an_error_not_a_placeholder(
    tmp_path: Path, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATE_KEY", raising=False)
    config = config_for(tmp_path, gate.base_url)
    proc = cli("run", str(config))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "$GATE_KEY (model.api_key_env) is not set" in proc.stderr and 'api_key_env: ""' in proc.stderr
    assert stored_cassettes(tmp_path) == 0


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"panel.seeds": [1180591620717411303424]},
            "field 'panel.seeds.0': Input should be less than or equal to 9223372036854775807 (got 1180591620717411303424)",
        ),
        ({"panel.seeds": []}, "field 'panel.seeds': List should have at least 1 item"),
        (
            {"executor.workers": 0},
            "field 'executor.workers': Input should be greater than or equal to 1 (got 0)",
        ),
        ({"model.name": ""}, "field 'model.name': String should have at least 1 character (got '')"),
        (
            {"record.rules": ["uuid"]},
            "field 'record.rules': unknown normalisation rule 'uuid'; known: codex-session, cwd, timestamps, uuids",
        ),
        ({"train.epochs": 0}, "field 'train.epochs': Input should be greater than or equal to 1 (got 0)"),
    ],
)
def test_bad_config_is_one_line_before_anything_is_recorded(
    tmp_path: Path, overrides: dict[str, Any], expected: str
) -> None:
    config = write_config(tmp_path, {"panel.tasks": TASKS, **overrides})
    proc = cli("train" if "train.epochs" in overrides else "run", str(config))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, (
        proc.stderr
    )
    assert expected in proc.stderr, proc.stderr
    assert stored_cassettes(tmp_path) == 0


def test_proxy_session_that_recorded_an_endpoint_error_is_rerecorded(
    tmp_path: Path, gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai

    from replaykit.episodes.proxy_session import run_proxy_session

    monkeypatch.setenv("GATE_KEY", GOOD_KEY)

    def session() -> dict[str, Any]:
        stop, statuses = threading.Event(), []
        result: dict[str, object] = {}

        def ready(url: str, kind: str) -> None:
            client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
            try:
                client.chat.completions.create(
                    model="reference-strong", messages=[{"role": "user", "content": "hi"}]
                )
                statuses.append(200)
            except openai.APIStatusError as exc:
                statuses.append(exc.status_code)
            stop.set()

        def work() -> None:
            result.update(
                run_proxy_session(
                    Store(tmp_path / "store"),
                    "s",
                    gate.base_url,
                    RecordMode.ONCE,
                    api_key_env="GATE_KEY",
                    on_ready=ready,
                    stop=stop,
                )
            )

        worker = threading.Thread(target=work)
        worker.start()
        worker.join(60)
        return {**result, "statuses": statuses}

    gate.status = 401
    failed = session()
    assert failed["mode"] == "record" and failed["statuses"] == [401]
    gate.status = 0  # fixed: the next `once` records again instead of replaying the 401
    fixed = session()
    assert fixed["mode"] == "record" and fixed["statuses"] == [200]
    again = session()
    assert again["mode"] == "replay" and again["identical"] and again["statuses"] == [200]
