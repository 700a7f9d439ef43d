"""Start and stop a real llama.cpp engine on loopback for tests (``models.engines``).

``LlamaServer(model_path, n_ctx=2048)`` runs llama-cpp-python's server (``--n_threads 1
--chat_format chatml-function-calling``) by default, or llama.cpp's own ``llama-server``
(``engine="llama-server"``: ``--jinja``, one slot, no prompt cache, a fixed seed) on a free
loopback port, waits until it answers, and stops it (the whole process group) on exit. Its
log goes to ``log_path`` (default: beside the model). Used by replaykit's engine tests and
benchmarks; usable in yours::

    with LlamaServer(write_tiny_model(tmp / "tiny.gguf")) as server:
        ...  # model.base_url: server.base_url, model.name: server.model
"""

from __future__ import annotations

from pathlib import Path

from replaykit.models.engines import FUNCTION_CALLING, EngineProcess, EngineSpec, free_port
from replaykit.models.engines import engine_missing as _engine_missing

CHAT_FORMAT = FUNCTION_CALLING
__all__ = ["CHAT_FORMAT", "LlamaServer", "engine_missing"]


def engine_missing(engine: str = "llama-cpp-python") -> str | None:
    """None when ``engine`` can run here, else a one-line reason naming its setup script."""
    return _engine_missing(engine)


class LlamaServer(EngineProcess):
    """A llama.cpp server process serving one GGUF file on 127.0.0.1."""

    def __init__(
        self,
        model_path: str | Path,
        n_ctx: int = 2048,
        chat_format: str = CHAT_FORMAT,
        extra_args: tuple[str, ...] = (),
        log_path: str | Path | None = None,
        port: int | None = None,
        start_timeout: float = 180.0,
        engine: str = "llama-cpp-python",
        alias: str | None = None,
        threads: int = 1,
    ) -> None:
        path = Path(model_path)
        spec = EngineSpec(
            path,
            alias or path.name,
            engine=engine,
            port=port or free_port(),
            n_ctx=n_ctx,
            threads=threads,
            chat_format=chat_format,
            extra_args=extra_args,
            log_path=Path(log_path) if log_path else path.with_suffix(f".{engine}.{n_ctx}.log"),
        )
        super().__init__(spec, start_timeout)

    @property
    def port(self) -> int:
        return self.spec.port

    @property
    def model(self) -> str:
        """The model name requests send (the alias it is served under: the file name by default)."""
        return self.spec.alias
