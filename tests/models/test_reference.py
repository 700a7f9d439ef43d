"""The reference model server, driven on loopback with the stock ``openai`` client."""

from __future__ import annotations

import json
import random
import socket
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from replaykit.core.determinism import SOURCE_DATE_EPOCH
from replaykit.models.reference.mistakes import corrupt_command
from replaykit.models.reference.scripts import solution_steps
from replaykit.models.reference.server import ReferenceServer
from replaykit.models.reference.simulator import read_progress

INSTRUCTION = "Create a folder `out` holding `a.txt` and `b.txt`, both containing the word hello."
SOLVE_SH = """#!/usr/bin/env bash
set -euo pipefail
# make the folder
mkdir -p out

echo hello > out/a.txt
cp out/a.txt out/b.txt
grep -q hello out/b.txt
test -f out/a.txt
"""
STEPS = [
    "mkdir -p out",
    "echo hello > out/a.txt",
    "cp out/a.txt out/b.txt",
    "grep -q hello out/b.txt",
    "test -f out/a.txt",
]
BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tasks")
    task = root / "make-out"
    (task / "solution").mkdir(parents=True)
    (task / "instruction.md").write_text(INSTRUCTION + "\n")
    (task / "solution" / "solve.sh").write_text(SOLVE_SH)
    return root


@pytest.fixture(scope="module")
def server(task_dir: Path) -> Iterator[ReferenceServer]:
    with ReferenceServer(task_dirs=[task_dir]) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: ReferenceServer) -> Any:  # raw dict messages: the wire form, untyped
    return openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0)


def first_messages() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a careful shell agent."},
        {"role": "user", "content": f"Task:\n{INSTRUCTION}\n"},
    ]


def body(model: str = "reference-oracle", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": first_messages(), "tools": [BASH_TOOL], "seed": 3, **extra}


def test_solution_steps_skip_shebang_set_and_comments() -> None:
    assert list(solution_steps(SOLVE_SH)) == STEPS


def test_non_streaming_tool_call_round_trip(client: Any) -> None:
    messages = first_messages()
    for expected in STEPS:
        reply = client.chat.completions.create(
            model="reference-oracle", messages=messages, tools=[BASH_TOOL], seed=1
        )
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert reply.created == SOURCE_DATE_EPOCH and reply.id.startswith("chatcmpl-")
        assert (
            reply.usage is not None
            and reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
        )
        (call,) = choice.message.tool_calls or []
        assert call.function.name == "bash"
        assert json.loads(call.function.arguments) == {"command": expected}
        assert expected in (choice.message.content or "")
        messages.append(choice.message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "exit_code: 0\n"})
    final = client.chat.completions.create(model="reference-oracle", messages=messages, tools=[BASH_TOOL])
    assert final.choices[0].finish_reason == "stop"
    assert not final.choices[0].message.tool_calls
    assert (final.choices[0].message.content or "").startswith("Done.")


def test_streaming_chunks_and_done(server: ReferenceServer, client: Any) -> None:
    payload = body(stream=True, stream_options={"include_usage": True})
    with httpx2.Client() as http:
        with http.stream("POST", f"{server.base_url}/chat/completions", json=payload) as resp:
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            assert resp.headers["transfer-encoding"] == "chunked"
            lines = [line for line in resp.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[len("data: ") :]) for line in lines[:-1]]
    assert len(chunks) >= 6
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert sum("content" in c["choices"][0]["delta"] for c in chunks if c["choices"]) >= 3
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"

    # The stock client reassembles the same tool call from the deltas.
    stream = client.chat.completions.create(
        model="reference-oracle", messages=first_messages(), tools=[BASH_TOOL], seed=3, stream=True
    )
    args, name, n = "", "", 0
    for chunk in stream:
        n += 1
        for delta_call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if delta_call.function is not None:
                name += delta_call.function.name or ""
                args += delta_call.function.arguments or ""
    assert n >= 6 and name == "bash"
    assert json.loads(args) == {"command": STEPS[0]}


def _read_chunked(sock_file: Any) -> list[bytes]:
    frames: list[bytes] = []
    while True:
        size = int(sock_file.readline().strip(), 16)
        data = sock_file.read(size)
        assert sock_file.read(2) == b"\r\n"
        if size == 0:
            return frames
        frames.append(data)


def test_one_http_chunk_per_sse_event_on_a_kept_alive_connection(server: ReferenceServer) -> None:
    payload = json.dumps(body(stream=True)).encode()
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode() + payload
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock_file = sock.makefile("rb")
        for _ in range(2):  # the same connection serves both requests
            sock.sendall(request)
            assert sock_file.readline().startswith(b"HTTP/1.1 200")
            headers = []
            while (line := sock_file.readline()) != b"\r\n":
                headers.append(line.decode().lower())
            assert "transfer-encoding: chunked\r\n" in headers
            frames = _read_chunked(sock_file)
            assert len(frames) >= 6 and frames[-1] == b"data: [DONE]\n\n"
            assert all(
                f.startswith(b"data: ") and f.endswith(b"\n\n") and f.count(b"\n\n") == 1 for f in frames
            )


def test_identical_requests_give_identical_bytes(server: ReferenceServer) -> None:
    url = f"{server.base_url}/chat/completions"
    with httpx2.Client() as http:
        for payload in (body("reference-weak"), body("reference-weak", stream=True)):
            raw = json.dumps(payload).encode()
            first = http.post(url, content=raw, headers={"content-type": "application/json"})
            second = http.post(url, content=raw, headers={"content-type": "application/json"})
            assert first.status_code == second.status_code == 200
            assert first.content == second.content
            assert dict(first.headers) == dict(second.headers)
        # Streamed events arrive identical one by one, too.
        events = []
        for _ in range(2):
            with http.stream("POST", url, json=body("reference-strong", stream=True)) as resp:
                events.append(list(resp.iter_bytes()))
        assert b"".join(events[0]) == b"".join(events[1])
        # A different seed or model is a different request: ids differ.
        a = http.post(url, json=body("reference-strong", seed=1)).json()
        b = http.post(url, json=body("reference-strong", seed=2)).json()
        assert a["id"] != b["id"]


def test_models_listing(client: Any) -> None:
    names = {m.id for m in client.models.list()}
    assert {"reference-strong", "reference-weak"} <= names
    assert client.models.retrieve("reference-weak").id == "reference-weak"


def test_errors_are_openai_style(server: ReferenceServer, client: Any) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert err.value.code == "model_not_found"
    with httpx2.Client() as http:
        bad = http.post(
            f"{server.base_url}/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
        missing = http.post(f"{server.base_url}/chat/completions", json={"model": "reference-weak"})
        assert missing.status_code == 400 and missing.json()["error"]["param"] == "messages"
        nowhere = http.get(f"{server.base_url}/nowhere")
        assert nowhere.status_code == 404 and "error" in nowhere.json()


def test_unknown_task_gets_a_plain_answer(client: Any) -> None:
    reply = client.chat.completions.create(
        model="reference-strong", messages=[{"role": "user", "content": "Tell me a joke."}], tools=[BASH_TOOL]
    )
    assert reply.choices[0].finish_reason == "stop" and not reply.choices[0].message.tool_calls
    assert "could not find a task" in (reply.choices[0].message.content or "")


def test_progress_conventions() -> None:
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
    }
    failed = {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Exit code: 127\nbash: mdkir: command not found",
    }
    assert read_progress([call, failed], 5, 4).step == 1  # unnoticed failure: moves on
    nudged = read_progress([call, failed, {"role": "user", "content": "That failed. Please RETRY."}], 5, 4)
    assert (nudged.step, nudged.attempt) == (0, 1)
    ok = {"role": "tool", "tool_call_id": "c1", "content": "exit_code=0"}
    assert read_progress([call, ok], 5, 4).step == 1


TRICKY = [
    "cd out && ls",
    "./build.sh",
    "cp a b",
    "ls",
    "tee x < /dev/null",
    "awk '$2 == \"ERROR\"' /dev/null | wc -l > n.txt",
    "true; echo still here",
    "false || echo rescued",
    "echo bg & wait",
    "echo 'it''s' 2>&1 # a comment",
    "python3 -c \"print('x')\" > x.txt",
    "X=1 env",
    "if true; then echo yes; fi",
]


@pytest.mark.parametrize("command", STEPS + TRICKY)
def test_corrupted_commands_fail(command: str, tmp_path: Path) -> None:
    wrongs = {corrupt_command(command, random.Random(seed)) for seed in range(12)}
    assert command not in wrongs
    for wrong in sorted(wrongs):
        done = subprocess.run(["bash", "-c", wrong], cwd=tmp_path, capture_output=True, timeout=10)
        assert done.returncode != 0, wrong


def run_episode(client: Any, model: str, seed: int, nudge: bool, workdir: Path, max_turns: int = 30) -> bool:
    """A tiny harness: run each proposed command, report its exit code, maybe nudge."""
    messages = first_messages()
    for _ in range(max_turns):
        reply = client.chat.completions.create(model=model, messages=messages, tools=[BASH_TOOL], seed=seed)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            command = json.loads(call.function.arguments)["command"]
            done = subprocess.run(
                ["bash", "-c", command], cwd=workdir, capture_output=True, text=True, timeout=10
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": f"exit_code: {done.returncode}\n{done.stdout}{done.stderr}",
                }
            )
            if done.returncode != 0 and nudge:
                messages.append({"role": "user", "content": "The command failed; please retry it."})
    a, b = workdir / "out" / "a.txt", workdir / "out" / "b.txt"
    return a.is_file() and b.is_file() and "hello" in a.read_text() and "hello" in b.read_text()


def test_skill_and_retry_nudge_change_completion_rates(client: Any, tmp_path: Path) -> None:
    seeds = range(20)
    configs = [(m, nudge) for m in ("reference-strong", "reference-weak") for nudge in (False, True)]

    def solved(config: tuple[str, bool], seed: int) -> bool:
        model, nudge = config
        workdir = tmp_path / f"{model}-{nudge}-{seed}"
        workdir.mkdir()
        return run_episode(client, model, seed, nudge, workdir)

    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {(c, s): pool.submit(solved, c, s) for c in configs for s in seeds}
    rates = {c: sum(futures[(c, s)].result() for s in seeds) / len(seeds) for c in configs}
    assert rates[("reference-strong", False)] > rates[("reference-weak", False)]
    assert (
        rates[("reference-strong", True)] > rates[("reference-weak", True)]
        or rates[("reference-strong", True)] == 1.0
    )
    assert rates[("reference-strong", True)] > rates[("reference-strong", False)]
    assert rates[("reference-weak", True)] > rates[("reference-weak", False)]
    print(rates)
