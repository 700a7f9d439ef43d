"""vcrpy interop: exported YAML cassettes replay under plain vcrpy with the stock openai
client (streamed SSE included), and the pytest plugin replays a replaykit cassette."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
import vcr
import yaml
from vcr.errors import CannotOverwriteExistingCassetteException
from vcr.request import Request

from replaykit.capture.recorder import episode_cassette
from replaykit.capture.tape import Tape
from replaykit.cassette.events import Episode, GradeEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.store import Store
from replaykit.envs.results import Grade
from replaykit.episodes.config import load_config
from replaykit.episodes.run import measure
from replaykit.exchange.vcr_export import DEFAULT_BASE_URL, export_vcr, json_body
from replaykit.models.endpoint import BUILTIN_KEY
from replaykit.models.reference.server import ReferenceServer
from replaykit.pytest_plugin import store_path
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
MATCH_ON = ["method", "path", "body"]


def record_stream(store: Store, body: dict[str, Any], harness_sha: str) -> str:
    """Record one streamed chat completion against the reference server into a cassette."""
    tape = Tape("stream")
    with ReferenceServer(task_dirs=[REPO / "envs" / "hello-file"]) as server:
        with episode_cassette("stream", tape):
            client = openai.OpenAI(base_url=server.base_url, api_key=BUILTIN_KEY, max_retries=0)
            for _ in client.chat.completions.create(**body, stream=True):
                pass
    key = CassetteKey(
        harness_sha,
        "hello-file",
        "-",
        ModelId("reference-weak", "builtin", "sim-1"),
        0,
        "stream-test",
        kind="probe",
    )
    store.put_episode(Episode(key=key, events=[*tape.events, GradeEvent(Grade(reward=0.0, passed=False))]))
    return key.id


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("vcr-source")
    cfg = load_config(
        REPO / "configs" / "quickstart.yaml",
        {
            "store": str(root / "store"),
            "harness.repo": str(root / "harness"),
            "panel.tasks": [str(REPO / "envs" / "hello-file")],
            "panel.seeds": [0],
            "env.timeout_sec": 28,
        },
    )
    run = measure(cfg).run
    store = Store(cfg.store_path)
    episode = store.get_episode(run.cassettes[0])
    stream_id = record_stream(store, dict(episode.llm_events[0].body), run.harness_sha)
    return {"root": root, "store": store, "run": run, "episode": episode, "stream_id": stream_id}


def message_of(content: bytes) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(content)["choices"][0]["message"]
    return message


def test_plain_vcrpy_replays_an_exported_run(recorded: dict[str, Any], tmp_path: Path) -> None:
    report = export_vcr(recorded["store"], recorded["run"].run_id, tmp_path / "vcr")
    episode: Episode = recorded["episode"]
    assert [f["cassette_id"] for f in report["files"]] == [episode.id]
    client = openai.OpenAI(base_url=DEFAULT_BASE_URL, api_key="sk-anything", max_retries=0)
    with vcr.use_cassette(report["files"][0]["path"], record_mode="none", match_on=MATCH_ON) as cassette:
        for event in episode.llm_events:
            reply = client.chat.completions.create(**event.body)
            recorded_message = message_of(event.content)
            assert reply.choices[0].message.content == recorded_message["content"]
            assert [c.function.arguments for c in reply.choices[0].message.tool_calls or []] == [
                c["function"]["arguments"] for c in recorded_message.get("tool_calls") or []
            ]
        assert cassette.all_played and cassette.play_count == len(episode.llm_events)


def sse_deltas(content: bytes) -> list[str]:
    out = []
    for line in content.decode().splitlines():
        if line.startswith("data: {"):
            choices = json.loads(line[6:]).get("choices") or []
            if choices:
                out.append(choices[0]["delta"].get("content") or "")
    return out


def test_plain_vcrpy_replays_a_streamed_response(recorded: dict[str, Any], tmp_path: Path) -> None:
    store: Store = recorded["store"]
    event = store.get_episode(recorded["stream_id"]).llm_events[0]
    assert len(event.chunks) > 2 and event.content.startswith(b"data: ")
    report = export_vcr(store, recorded["stream_id"][:12], tmp_path / "vcr")
    client = openai.OpenAI(base_url=DEFAULT_BASE_URL, api_key="sk-anything", max_retries=0)
    with vcr.use_cassette(report["files"][0]["path"], record_mode="none", match_on=MATCH_ON):
        body = dict(event.body)
        body.pop("stream")
        deltas = [
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(**body, stream=True)
            if c.choices
        ]
    assert deltas == sse_deltas(event.content) and "".join(deltas)


def test_an_unrecorded_request_is_refused_by_vcrpy(recorded: dict[str, Any], tmp_path: Path) -> None:
    report = export_vcr(recorded["store"], recorded["run"].run_id, tmp_path / "vcr")
    body = dict(recorded["episode"].llm_events[0].body, seed=12345)
    client = openai.OpenAI(base_url=DEFAULT_BASE_URL, api_key="sk-anything", max_retries=0)
    with vcr.use_cassette(report["files"][0]["path"], record_mode="none", match_on=MATCH_ON):
        with pytest.raises(CannotOverwriteExistingCassetteException):
            client.chat.completions.create(**body)


def test_uris_follow_the_base_url_and_no_secret_or_header_is_exported(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    base = "http://models.internal:9000/api/v1"
    report = export_vcr(recorded["store"], recorded["run"].run_id, tmp_path / "vcr", base_url=base)
    path = Path(report["files"][0]["path"])
    text = path.read_text()
    assert BUILTIN_KEY not in text and "uthorization" not in text and "stainless" not in text
    data = yaml.safe_load(text)
    assert data["version"] == 1 and "metadata" not in data
    sidecar = json.loads(Path(report["files"][0]["metadata"]).read_text())
    assert (
        sidecar["replaykit"]["cassette_id"] == recorded["episode"].id
        and sidecar["replaykit"]["base_url"] == base
    )
    for interaction in data["interactions"]:
        assert interaction["request"]["uri"] == base + "/chat/completions"
        assert interaction["request"]["headers"] == {"Content-Type": ["application/json"]}
    client = openai.OpenAI(base_url=base, api_key="sk-anything", max_retries=0)
    with vcr.use_cassette(str(path), record_mode="none", match_on=["method", "uri", "body"]):
        reply = client.chat.completions.create(**recorded["episode"].llm_events[0].body)
    assert (
        reply.choices[0].message.content == message_of(recorded["episode"].llm_events[0].content)["content"]
    )


def test_json_body_matcher_ignores_key_order_and_spacing() -> None:
    a = Request("POST", "http://x/v1/chat/completions", b'{"b": 1, "a": [1, 2]}', {})
    b = Request("POST", "http://x/v1/chat/completions", b'{"a":[1,2],"b":1}', {})
    c = Request("POST", "http://x/v1/chat/completions", b'{"a":[2,1],"b":1}', {})
    json_body(a, b)
    with pytest.raises(AssertionError):
        json_body(a, c)


def test_cli_exports_vcr_cassettes(recorded: dict[str, Any], tmp_path: Path) -> None:
    out = cli(
        "cassettes",
        "export",
        recorded["run"].run_id,
        "--format",
        "vcr",
        "-o",
        str(tmp_path / "v"),
        "--base-url",
        "http://127.0.0.1:1234/v1",
        "--store",
        str(recorded["store"].root),
        "--json",
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    files = json.loads(out.stdout)["files"]
    assert (
        len(files) == 1
        and Path(files[0]["path"]).is_file()
        and files[0]["interactions"] == len(recorded["episode"].llm_events)
    )


PYTEST_RECORDING_TEST = """
import json, openai, pytest

@pytest.fixture(scope="module")
def vcr_config():
    return {{"match_on": ["method", "path", "body"]}}

@pytest.fixture(scope="module")
def vcr_cassette_dir():
    return {dir!r}

@pytest.fixture
def default_cassette_name():
    return {name!r}

@pytest.mark.vcr
def test_replayed_by_pytest_recording():
    client = openai.OpenAI(base_url="http://127.0.0.1:8765/v1", api_key="sk-anything", max_retries=0)
    reply = client.chat.completions.create(**json.loads({body!r}))
    assert reply.choices[0].message.content == {expected!r}
"""


def test_pytest_recording_loads_an_export(
    recorded: dict[str, Any], pytester: pytest.Pytester, tmp_path: Path
) -> None:
    report = export_vcr(recorded["store"], recorded["run"].run_id, tmp_path / "vcr")
    event = recorded["episode"].llm_events[0]
    pytester.makepyfile(
        test_user=PYTEST_RECORDING_TEST.format(
            dir=str(tmp_path / "vcr"),
            name=report["files"][0]["cassette_id"],
            body=json.dumps(event.body),
            expected=message_of(event.content)["content"],
        )
    )
    result = pytester.runpytest("--record-mode=none", "-p", "no:cacheprovider", "-p", "recording")
    result.assert_outcomes(passed=1)


# -- the pytest plugin ------------------------------------------------------------------
PLUGIN_TESTS = """
import json, openai, pytest

BODIES = json.load(open("bodies.json"))
CID = open("cassette_id.txt").read().strip()

def client():
    return openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused", max_retries=0)

def test_replays_recorded_calls(replaykit_cassette):
    with replaykit_cassette(CID[:10], require_all=True) as replay:
        for body, expected in zip(BODIES, replay.recorded):
            reply = client().chat.completions.create(**body)
            assert reply.choices[0].message.content == json.loads(expected.content)["choices"][0]["message"]["content"]
    assert replay.played == len(BODIES) and replay.remaining == 0

def test_unrecorded_request_fails(replaykit_cassette):
    with replaykit_cassette(CID) as replay:
        client().chat.completions.create(**dict(BODIES[0], temperature=0.7))

def test_fewer_calls_fail_when_all_required(replaykit_cassette):
    with replaykit_cassette(CID, require_all=True):
        client().chat.completions.create(**BODIES[0])

def test_unknown_cassette_fails(replaykit_cassette):
    with replaykit_cassette("0000000000"):
        pass
"""


def test_pytest_plugin_replays_a_cassette(recorded: dict[str, Any], pytester: pytest.Pytester) -> None:
    episode: Episode = recorded["episode"]
    pytester.makefile(".json", bodies=json.dumps([e.body for e in episode.llm_events]))
    pytester.makefile(".txt", cassette_id=episode.id)
    pytester.makepyfile(test_user=PLUGIN_TESTS)
    result = pytester.runpytest("--replaykit-store", str(recorded["store"].root), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        ["*diverged at event 0: request differs (body: body differs*", "*+*temperature*0.7*"]
    )
    result.stdout.fnmatch_lines(["*made 1 of * recorded LLM calls*"])
    result.stdout.fnmatch_lines(["*no cassette '0000000000'*"])


def test_plugin_store_resolution(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("REPLAYKIT_STORE", raising=False)
    assert store_path(pytester.parseconfig()) == pytester.path / "cassettes"
    monkeypatch.setenv("REPLAYKIT_STORE", str(tmp_path / "env"))
    assert store_path(pytester.parseconfig()) == tmp_path / "env"
    pytester.makeini("[pytest]\nreplaykit_store = shared/cassettes\n")
    assert store_path(pytester.parseconfig()) == pytester.path / "shared" / "cassettes"
    assert store_path(pytester.parseconfig("--replaykit-store", str(tmp_path / "opt"))) == tmp_path / "opt"
