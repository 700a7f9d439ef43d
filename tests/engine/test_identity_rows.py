"""Every change that changes answers stops reuse with one line; changes that leave answers
bit-identical do not. One test per row of issue 27's identity table, on real engines:

- llama-cpp-python, alias ``m``: another GGUF under the same alias, another chat format
  (server facts miss both: only the canary sees them), n_threads / n_batch (reused);
- llama.cpp's llama-server (--jinja; test_identity_rows_llama_server.py): the GGUF rewritten in place, another chat template,
  another n_ctx, threads / batch size (reused).

Each run asks SmolLM2 (or the tiny model) once per task with the bash tool and never acts
(``asker.py``): what matters here is the identity each cassette was recorded under.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replaykit.models.engines import free_port
from replaykit.testing.llama_server import LlamaServer
from tests.cli_runner import cli
from tests.engine.asker import asker_config

pytestmark = pytest.mark.engine  # real llama.cpp engines (tests/engine/conftest.py)

TASKS = ["hello-file"]


def recorded(config: Path) -> dict[str, Any]:
    run: dict[str, Any] = json.loads(cli("run", str(config), "--json", check=True).stdout)
    assert run["recorded_count"] == 1 and run["episodes"][0]["llm_calls"] == 1
    return run


def refused(config: Path, *named: str) -> str:
    proc = cli("run", str(config))
    line = proc.stderr.strip()
    assert proc.returncode == 1 and len(line.splitlines()) == 1 and "Traceback" not in line, proc.stderr
    assert "reports another engine" in line and "--accept-engine-change" in line, line
    for name in named:
        assert name in line, line
    return line


def reused(config: Path, first: dict[str, Any]) -> None:
    again = json.loads(cli("run", str(config), "--json", check=True).stdout)
    assert again["reused_count"] == 1 and again["run_id"] == first["run_id"]


@pytest.fixture
def asker(engine_config: Callable[..., Path], tmp_path: Path) -> Callable[[LlamaServer], Path]:
    return asker_config(engine_config, tmp_path, TASKS)


def test_llama_cpp_python_alias_m_another_gguf_and_another_chat_format_stop_reuse(
    smollm2: Path, tiny_model: Path, asker: Callable[[LlamaServer], Path], tmp_path: Path
) -> None:
    """Done when: a run recorded on SmolLM2 is never reused silently after the GGUF is swapped
    under the same alias, nor after --chat_format changes; n_threads / n_batch still reuse."""
    port = free_port()

    def serve(model: Path, name: str, **kw: Any) -> LlamaServer:
        return LlamaServer(model, n_ctx=2048, port=port, alias="m", log_path=tmp_path / f"{name}.log", **kw)

    with serve(smollm2, "smol") as server:
        config = asker(server)
        first = recorded(config)
    assert first["engine"]["model"] == "m" and first["engine"]["engine"] == "llama-cpp-python"
    with serve(tiny_model, "swapped"):  # another GGUF, the same alias, the same n_ctx
        refused(config, "canary")
    with serve(smollm2, "chatml", chat_format="chatml"):
        refused(config, "canary")
    with serve(smollm2, "threads", threads=2, extra_args=("--n_batch", "64")):
        reused(config, first)
