"""A key that reaches a response in pieces — one character per SSE delta, spread over a
streamed tool call's arguments, or written with JSON ``\\u`` escapes — is scrubbed from what is
stored, and so from the transcript, the report, the viewer's pages and its search index.
Through ``replaykit run`` against a real loopback upstream that echoes the client's key so."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.core.loopback import LoopbackHandler, LoopbackServer
from replaykit.testing import REPO_ROOT, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

KEY = "sk-piecewise-3c9e81f0a2d7"
HARNESS = """
TOOLS = [{"type": "function", "function": {"name": "sh", "parameters": {"type": "object"}}}]


def solve(task, env, llm, ctx):
    msgs = [{"role": "user", "content": task.instruction}]
    deltas = llm.chat.completions.create(messages=msgs, stream=True, **ctx.llm_kwargs())
    text = "".join((c.choices[0].delta.content or "") for c in deltas if c.choices)
    args = ""
    for c in llm.chat.completions.create(messages=msgs + [{"role": "user", "content": "a tool"}], stream=True, tools=TOOLS, **ctx.llm_kwargs()):
        if c.choices and c.choices[0].delta.tool_calls:
            args += c.choices[0].delta.tool_calls[0].function.arguments or ""
    plain = llm.chat.completions.create(messages=msgs + [{"role": "user", "content": "plain"}], **ctx.llm_kwargs())
    said = [text, args, plain.choices[0].message.content]  # offline replay gets placeholders back
    env.run("printf %s " + str(sum(1 for s in said if "your key is" in s or "curl" in s)) + " > out.txt")
    return text
"""


class Echo(LoopbackServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EchoHandler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    doc = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    doc["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps(doc)}\n\n".encode()


class _EchoHandler(LoopbackHandler):
    def _dispatch(self, method: str) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        said = f"your key is {key}, keep it safe"
        if body.get("stream"):
            if body.get("tools"):  # the key inside a tool call's arguments, 3 characters a delta
                args = json.dumps({"cmd": f"curl -H 'Authorization: Bearer {key}' https://example.invalid"})
                events = [
                    chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": "t",
                                    "type": "function",
                                    "function": {"name": "sh", "arguments": ""},
                                }
                            ]
                        }
                    )
                ]
                events += [
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[i : i + 3]}}]})
                    for i in range(0, len(args), 3)
                ]
                events.append(chunk({}, "tool_calls"))
            else:  # the key one character per delta
                events = [chunk({"role": "assistant", "content": ""})]
                events += [chunk({"content": c}) for c in said] + [chunk({}, "stop")]
            data = b"".join(events) + b"data: [DONE]\n\n"
            ctype = "text/event-stream"
        else:  # the key written with JSON \\u escapes
            escaped = "".join(f"\\u{ord(c):04x}" for c in key)
            message = '{"role": "assistant", "content": "your key is ' + escaped + '"}'
            data = (
                '{"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": '
                '[{"index": 0, "message": ' + message + ', "finish_reason": "stop"}]}'
            ).encode()
            ctype = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def echo() -> Iterator[Echo]:
    server = Echo()
    yield server
    server.shutdown()
    server.server_close()


def harness(path: Path) -> None:
    path.mkdir()
    (path / "harness.py").write_text(HARNESS)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "piecewise"], check=True)


def test_a_key_in_pieces_reaches_no_store_transcript_report_page_or_index(
    tmp_path: Path, echo: Echo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    harness(tmp_path / "harness")
    values = {
        "panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")],
        "panel.seeds": [0],
        "harness.template": None,
        "model.base_url": echo.base_url,
        "model.api_key_env": "PIECEWISE_KEY",
    }
    env = {"PIECEWISE_KEY": KEY}
    run = cli("run", str(write_config(tmp_path, values)), "--json", env=env)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    store = str(tmp_path / "store")
    cassette = doc["cassettes"][0]
    shown = cli("cassettes", "show", cassette, "--transcript", "--store", store, check=True).stdout
    assert shown.count("<secret:api_key>") >= 3, shown  # the three answers held it, and say so
    full = cli("cassettes", "show", cassette, "--full", "--json", "--store", store, check=True).stdout
    report = tmp_path / "run.html"
    cli("report", doc["run_id"], "-o", str(report), "--store", store, check=True)
    replay = cli("replay", doc["run_id"], "--json", "--store", store, env=env)
    assert json.loads(replay.stdout)["identical"] is True, replay.stdout + replay.stderr
    pages = viewer_pages(store, cassette)
    outputs = {"transcript": shown, "show --full": full, "report": report.read_text(), **pages}
    assert [name for name, text in outputs.items() if KEY in text] == []
    for piece in ("curl -H 'Authorization: Bearer sk-", "your key is sk-"):
        assert [name for name, text in outputs.items() if piece in text] == [], piece
    files = [p for p in tmp_path.rglob("*") if p.is_file() and ".git" not in p.parts]
    assert any(p.name.startswith("search-") for p in files)  # the viewer's index was built
    assert [str(p) for p in files if KEY.encode() in p.read_bytes()] == []


def viewer_pages(store: str, cassette: str) -> dict[str, str]:
    """The viewer's episode page and a search that builds its index (in-process, on loopback names)."""
    from starlette.testclient import TestClient

    from replaykit.cassette.stores import open_store
    from replaykit.view.app import create_app

    with TestClient(
        create_app(open_store(store, readonly=True), poll_seconds=0), base_url="http://127.0.0.1"
    ) as client:
        episode = client.get(f"/episodes/{cassette}?full=1")
        found = client.get("/search", params={"q": "keep"})
        assert episode.status_code == 200 and found.status_code == 200
        return {"episode page": episode.text, "search": found.text}
