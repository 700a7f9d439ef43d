"""A real llama.cpp server with the tiny random-weight model, for the tests marked ``engine``.

``tiny_model`` writes the GGUF once per session (replaykit.models.tiny_model);
``llama_server`` serves it on a free loopback port (``--n_ctx 2048 --n_threads 1
--chat_format chatml-function-calling``) and stops it after the session; ``engine_config``
writes a quickstart config pointed at it. ``smollm2`` is the real model's GGUF and
``smol_server`` llama.cpp's own llama-server serving it, one per module. When an engine is
missing the tests FAIL (run scripts/setup-engine.sh, scripts/setup-llama-server.sh),
unless ``REPLAYKIT_ALLOW_ENGINE_SKIP=1`` (then they skip); under ``CI`` they always fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from replaykit.models.model_files import model_file
from replaykit.models.tiny_model import write_tiny_model
from replaykit.testing import write_config
from replaykit.testing.llama_server import LlamaServer, engine_missing

#: what the engine tests send: one forced bash call per turn (llama-cpp-python's
#: function-calling format uses tools only when tool_choice is sent), short replies
PARAMS = {"max_tokens": 32, "tool_choice": {"type": "function", "function": {"name": "bash"}}}


def _require_engine(engine: str = "llama-cpp-python") -> None:
    reason = engine_missing(engine)
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"engine tests must run in CI: {reason}", pytrace=False)
    if os.environ.get("REPLAYKIT_ALLOW_ENGINE_SKIP") == "1":
        pytest.skip(reason)
    pytest.fail(f"{reason} (or set REPLAYKIT_ALLOW_ENGINE_SKIP=1 to skip)", pytrace=False)


@pytest.fixture(autouse=True)
def _engine_required() -> None:
    """Every test here needs the engine: missing, it fails (skips only when allowed, never in CI)."""
    _require_engine()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _require_engine()  # before any write: a session fixture runs before the autouse one
    return write_tiny_model(tmp_path_factory.mktemp("engine") / "tiny.gguf", seed=0)


@pytest.fixture(scope="session")
def llama_server(tiny_model: Path) -> Iterator[LlamaServer]:
    with LlamaServer(tiny_model, n_ctx=2048) as server:
        yield server


@pytest.fixture(scope="session")
def llama_server_engine() -> None:
    """llama.cpp's own llama-server is built (scripts/setup-llama-server.sh)."""
    _require_engine("llama-server")


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct's GGUF (scripts/setup-engine.sh caches it; fetched here otherwise)."""
    _require_engine()
    return model_file("smollm2")


@pytest.fixture(scope="module")
def smol_server(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's own llama-server serving SmolLM2 (--jinja, one slot, no prompt cache, seed 0),
    one per test module that asks for it."""
    _require_engine("llama-server")
    log = tmp_path_factory.mktemp("smol") / "llama-server.log"
    with LlamaServer(smollm2, n_ctx=4096, engine="llama-server", alias="smollm2", log_path=log) as server:
        yield server


@pytest.fixture
def engine_config(tmp_path: Path) -> Callable[..., Path]:
    """``engine_config(server, **overrides)``: a quickstart config on ``server``'s model."""

    def make(server: LlamaServer, overrides: dict[str, Any] | None = None, name: str = "config.yaml") -> Path:
        values: dict[str, Any] = {
            "model": {
                "name": server.model,
                "base_url": server.base_url,
                "api_key_env": "",
                "temperature": 0.0,
                "params": PARAMS,
            },
            "harness.params.max_steps": 2,
        }
        values.update(overrides or {})
        return write_config(tmp_path, values, name=name)

    return make
