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


def serve(routes: dict[str, Any]) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = routes.get(self.path)
            data = json.dumps(body).encode() if body is not None else b"{}"
            self.send_response(200 if body is not None else 404)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


LLAMA_CPP = {
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
    "/v1/models": {"data": [{"id": "Qwen/Qwen3-4B", "owned_by": "vllm", "max_model_len": 32768}]},
    "/version": {"version": "0.11.0"},
}
SGLANG = {
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


def test_a_hosted_api_listing_many_models_keeps_only_the_configured_one() -> None:
    routes = {"/v1/models": {"data": [{"id": f"model-{i}", "owned_by": "system"} for i in range(50)]}}
    for url in serve(routes):
        assert measure_identity(url, model="model-7") == {"model": "model-7"}
        assert measure_identity(url, model="absent") == {}


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
