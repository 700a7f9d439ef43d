"""The identity rows on llama.cpp's own llama-server (--jinja): the GGUF rewritten in place,
another chat template, another n_ctx stop reuse; threads / batch size do not."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from replaykit.models.engines import free_port
from replaykit.models.tiny_model import write_tiny_model
from replaykit.testing.llama_server import LlamaServer
from tests.engine.asker import asker_config
from tests.engine.test_identity_rows import recorded, refused, reused

pytestmark = pytest.mark.engine  # real llama.cpp engines (tests/engine/conftest.py)


@pytest.fixture
def asker(engine_config: Callable[..., Path], tmp_path: Path) -> Callable[[LlamaServer], Path]:
    return asker_config(engine_config, tmp_path, ["hello-file"])


@pytest.mark.usefixtures("llama_server_engine")
def test_llama_server_gguf_rewritten_in_place_stops_reuse(
    asker: Callable[[LlamaServer], Path], tmp_path: Path
) -> None:
    model = write_tiny_model(tmp_path / "tiny.gguf", seed=0)
    port = free_port()

    def serve(name: str) -> LlamaServer:
        return LlamaServer(
            model, port=port, engine="llama-server", alias="tiny", log_path=tmp_path / f"{name}.log"
        )

    with serve("a") as server:
        config = asker(server)
        first = recorded(config)
    assert (
        first["engine"]["engine"] == "llama.cpp" and first["engine"]["model_path"] == model.name
    )  # the file, never where it is
    write_tiny_model(model, seed=1)  # the same path, the same size, other weights
    with serve("b"):
        refused(config, "canary")
    write_tiny_model(model, seed=0)  # back as it was: the same engine again
    with serve("c"):
        reused(config, first)


@pytest.mark.usefixtures("llama_server_engine")
def test_llama_server_another_chat_template_another_n_ctx_stop_reuse_threads_and_batch_do_not(
    smollm2: Path, asker: Callable[[LlamaServer], Path], tmp_path: Path
) -> None:
    port = free_port()
    template = tmp_path / "template.jinja"  # ChatML with another default system prompt
    template.write_text(
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\\nYou are a careful shell assistant.<|im_end|>\\n' }}{% endif %}"
        "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )

    def serve(name: str, n_ctx: int = 4096, extra: tuple[str, ...] = (), threads: int = 1) -> LlamaServer:
        return LlamaServer(
            smollm2,
            n_ctx=n_ctx,
            port=port,
            engine="llama-server",
            alias="smollm2",
            threads=threads,
            extra_args=extra,
            log_path=tmp_path / f"{name}.log",
        )

    with serve("a") as server:
        config = asker(server)
        first = recorded(config)
    assert first["engine"]["n_ctx"] == 4096 and str(first["engine"]["chat_template"]).startswith("sha256:")
    with serve("template", extra=("--chat-template-file", str(template))):
        refused(config, "chat_template sha256:")
    with serve("ctx", n_ctx=2048):
        refused(config, "n_ctx 4096 → 2048")
    with serve("threads", threads=2, extra=("--batch-size", "64", "--ubatch-size", "64")):
        reused(config, first)
