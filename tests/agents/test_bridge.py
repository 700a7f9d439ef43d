"""The recording bridge on its own: a bearer token on every request, the run's fields over the
agent's, the upstream's bytes back, commands to the environment, and what the episode raises kept
for the harness (the agent gets a 502)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from types import SimpleNamespace
from typing import Any

import pytest

from replaykit.agents.bridge import Bridge
from replaykit.envs.results import Observation
from replaykit.episodes.harness import Context


class FakeLlm:
    """``llm.chat.completions.with_raw_response.create`` recording what it was sent."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.fail = fail
        self.chat = SimpleNamespace(completions=SimpleNamespace(with_raw_response=self))

    def create(self, **kwargs: Any) -> Any:
        if self.fail is not None:
            raise self.fail
        self.sent.append(kwargs)
        return SimpleNamespace(
            http_response=SimpleNamespace(status_code=200, content=b'{"upstream": "bytes"}')
        )


class FakeEnv:
    def __init__(self) -> None:
        self.ran: list[tuple[str, float | None]] = []

    def run(self, command: str, timeout_sec: float | None = None) -> Observation:
        self.ran.append((command, timeout_sec))
        return Observation("out\n", "err\n", 3)


def post(url: str, body: object, token: str | None, method: str = "POST") -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if method == "POST" else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def context() -> Context:
    return Context(seed=0, task_id="t", model="run-model", temperature=0.0, model_params={"max_tokens": 64})


def test_the_run_owns_model_temperature_seed_and_model_params_the_rest_passes_through() -> None:
    llm, env = FakeLlm(), FakeEnv()
    with Bridge(llm, env, context()) as bridge:
        bridge.gate.admit(os.getpid())  # this test plays the agent
        body = {
            "model": "openai/whatever",
            "temperature": 0.9,
            "seed": 7,
            "max_tokens": 4096,
            "stop": ["END"],
            "messages": [{"role": "user", "content": "hi"}],
        }
        status, answer = post(f"{bridge.url}/v1/chat/completions", body, bridge.token)
        assert (status, answer) == (200, {"upstream": "bytes"})
        status, ran = post(f"{bridge.url}/exec", {"command": "ls", "timeout": 5}, bridge.token)
        assert (status, ran) == (
            200,
            {"stdout": "out\n", "stderr": "err\n", "exit_code": 3, "timed_out": False},
        )
        status, models = post(f"{bridge.url}/v1/models", None, bridge.token, method="GET")
        assert status == 200 and [m["id"] for m in models["data"]] == ["run-model"]
    (sent,) = llm.sent
    assert sent["model"] == "run-model" and sent["temperature"] == 0.0 and sent["max_tokens"] == 64
    assert sent["seed"] != 7 and sent["messages"] == body["messages"]
    assert sent["extra_body"] == {"stop": ["END"]}
    assert bridge.token not in json.dumps(sent)  # the agent's bearer token is never sent on, nor stored
    assert env.ran == [("ls", 5.0)] and (bridge.model_calls, bridge.commands) == (1, 1)


def test_without_the_token_or_streaming_the_bridge_refuses() -> None:
    llm = FakeLlm()
    with Bridge(llm, FakeEnv(), context()) as bridge:
        bridge.gate.admit(os.getpid())  # this test plays the agent
        assert post(f"{bridge.url}/v1/chat/completions", {"messages": []}, None)[0] == 401
        assert post(f"{bridge.url}/v1/chat/completions", {"messages": []}, "wrong")[0] == 401
        status, error = post(
            f"{bridge.url}/v1/chat/completions", {"messages": [], "stream": True}, bridge.token
        )
        assert status == 400 and "does not stream" in error["error"]["message"]
        assert post(f"{bridge.url}/v1/other", {}, bridge.token)[0] == 404
    assert llm.sent == [] and bridge.failure is None


def test_what_the_episode_raises_is_kept_and_every_later_request_refused() -> None:
    boom = RuntimeError("limit reached")
    with Bridge(FakeLlm(fail=boom), FakeEnv(), context()) as bridge:
        bridge.gate.admit(os.getpid())  # this test plays the agent
        status, error = post(f"{bridge.url}/v1/chat/completions", {"messages": []}, bridge.token)
        assert status == 502 and "limit reached" in error["error"]["message"]
        assert bridge.failure is boom and bridge.failed.is_set()
        assert post(f"{bridge.url}/exec", {"command": "ls"}, bridge.token)[0] == 502
    with pytest.raises(urllib.error.URLError):  # closed with the block
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            f"{bridge.url}/v1/models", timeout=5
        )


def test_a_request_of_another_shape_is_one_line_and_runs_nothing() -> None:
    """Requests are parsed as their wire model (``agents/wire.py``): a wrong type is a 400 naming
    the field, never a traceback, and nothing reaches the model or the environment."""
    llm, env = FakeLlm(), FakeEnv()
    with Bridge(llm, env, context()) as bridge:
        bridge.gate.admit(os.getpid())  # this test plays the agent
        chat, run = f"{bridge.url}/v1/chat/completions", f"{bridge.url}/exec"
        cases = [
            (chat, {"messages": "hi"}, "'messages'"),
            (chat, [1, 2], "must be a JSON object"),
            (run, {"cmd": "ls"}, "'command'"),
            (run, {"command": 3}, "'command'"),
            (run, {"command": "ls", "timeout": "soon"}, "'timeout"),
        ]
        for url, body, says in cases:
            status, error = post(url, body, bridge.token)
            message = error["error"]["message"]
            assert status == 400 and says in message and "\n" not in message, (body, message)
        request = urllib.request.Request(
            run, data=b"{not json", headers={"Authorization": f"Bearer {bridge.token}"}, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30)
        assert refused.value.code == 400 and b"not JSON" in refused.value.read()
    assert llm.sent == [] and env.ran == [] and bridge.failure is None
