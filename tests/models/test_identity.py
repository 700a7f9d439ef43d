"""Engine identities from what servers say about themselves: llama.cpp /props, vLLM /version
and max_model_len, SGLang /get_server_info; what changed, named field by field."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from replaykit.core.records import JSON
from replaykit.models.identity import identity_changes, identity_digest, measure_identity

pytestmark = pytest.mark.unit


def reply(
    content: str = "", arguments: str = '{"command": "touch ready.txt"}', prompt_tokens: int = 40
) -> Any:
    """A chat completion as an engine answers the canary (its ids change every call)."""
    call = {
        "id": f"call_{id(object())}",
        "type": "function",
        "function": {"name": "bash", "arguments": arguments},
    }
    return {
        "id": f"chatcmpl-{id(object())}",
        "choices": [{"message": {"content": content, "tool_calls": [call]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 8},
    }


def serve(routes: dict[str, Any], posted: list[Any] | None = None) -> Iterator[str]:
    """A fake server: GET paths answer ``routes[path]``; POST paths ``routes["POST " + path]``
    (a callable is called each time); what was POSTed is appended to ``posted``."""

    class Handler(BaseHTTPRequestHandler):
        def answer(self, body: Any) -> None:
            body = body() if callable(body) else body
            data = json.dumps(body).encode() if body is not None else b"{}"
            self.send_response(200 if body is not None else 404)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.answer(routes.get(self.path))

        def do_POST(self) -> None:
            sent = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if posted is not None:
                posted.append({"path": self.path, **sent})
            self.answer(routes.get("POST " + self.path))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


CHAT = {"POST /v1/chat/completions": reply}
LLAMA_CPP = {
    **CHAT,
    "/v1/models": {"data": [{"id": "qwen3-4b.gguf", "owned_by": "llamacpp"}]},
    "/props": {
        "default_generation_settings": {"n_ctx": 8192},
        "total_slots": 1,
        "model_path": "/models/qwen3-4b.gguf",
        "chat_template": "{% for m in messages %}" * 10,
        "build_info": "b6000-abc",
    },
}
VLLM = {
    **CHAT,
    "/v1/models": {"data": [{"id": "Qwen/Qwen3-4B", "owned_by": "vllm", "max_model_len": 32768}]},
    "/version": {"version": "0.11.0"},
}
SGLANG = {
    **CHAT,
    "/v1/models": {"data": [{"id": "Qwen/Qwen3-4B", "owned_by": "sglang"}]},
    "/get_server_info": {
        "model_path": "Qwen/Qwen3-4B",
        "context_length": 32768,
        "enable_deterministic_inference": True,
        "random_seed": 1,
        "version": "0.5.4",
        "port": 30000,
    },
}


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        (LLAMA_CPP, {"engine": "llama.cpp", "n_ctx": 8192, "total_slots": 1, "build_info": "b6000-abc"}),
        (VLLM, {"engine": "vllm", "version": "0.11.0", "model": "Qwen/Qwen3-4B", "max_model_len": 32768}),
        (
            SGLANG,
            {
                "engine": "sglang",
                "sglang.enable_deterministic_inference": True,
                "sglang.context_length": 32768,
            },
        ),
    ],
)
def test_each_engine_reports_what_changes_answers(routes: dict[str, Any], expected: dict[str, Any]) -> None:
    for url in serve(routes):
        fields = measure_identity(url)
    assert fields is not None and expected.items() <= fields.items()
    assert "sglang.port" not in fields  # a port never changes answers
    if "chat_template" in fields:
        assert str(fields["chat_template"]).startswith("sha256:")  # long texts enter as a digest
    assert fields["canary_prompt_tokens"] == 40 and len(str(fields["canary"])) == 16  # self-hosted: a canary


def test_a_hosted_api_listing_many_models_keeps_only_the_configured_one() -> None:
    """A hosted API's listed model gets no canary (its replies vary at temperature 0); a model it
    does not list must answer the canary, as an endpoint that lists none does."""
    listing = {"/v1/models": {"data": [{"id": f"model-{i}", "owned_by": "system"} for i in range(50)]}}
    posted: list[Any] = []
    for url in serve(listing, posted):
        assert measure_identity(url, model="model-7") == {"model": "model-7"}
        assert measure_identity(url, model="absent") == {}  # asked, unanswered: the run's first call says why
    assert [p["path"] for p in posted] == ["/v1/chat/completions"]  # only for the unlisted one


def test_an_endpoint_that_does_not_answer_has_no_identity() -> None:
    assert measure_identity("http://127.0.0.1:9/v1", timeout=1) is None


def test_changes_name_each_field_and_the_digest_follows_them() -> None:
    before: dict[str, JSON] = {"engine": "llama.cpp", "n_ctx": 2048, "model": "a.gguf"}
    after: dict[str, JSON] = {"engine": "llama.cpp", "n_ctx": 4096, "model": "b.gguf"}
    assert identity_changes(before, after) == ["model a.gguf → b.gguf", "n_ctx 2048 → 4096"]
    assert identity_digest(before) != identity_digest(after) and identity_digest(before) == identity_digest(
        dict(before)
    )


def test_a_trickling_endpoint_costs_a_run_no_more_than_one_call_may_take() -> None:
    """``model.timeout_s`` bounds the identity measurement before a run too (its own bound,
    10 s in all, would otherwise hold a run with a 2 s call deadline five times as long)."""
    import time

    from replaykit.episodes.engine_check import live_engine
    from replaykit.models.config import ModelConfig

    class Trickle(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-length", "100000")
            self.end_headers()
            try:
                for _ in range(100_000):  # a byte every 50 ms: each read is quick, the whole never ends
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:  # the client gave up
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        model = ModelConfig(name="m", base_url=url, api_key_env="", timeout_s=2)
        started = time.monotonic()
        assert live_engine(model, "once", True) is None  # nothing learnt: the deadline passed first
        elapsed = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    assert 1.5 < elapsed < 6, elapsed  # 2 s (model.timeout_s), not the measurement's own 10 s
