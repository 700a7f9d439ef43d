"""Benchmark: replaykit's recording overhead per call against a real engine's own time per call.

A real engine serves a real model: by default llama.cpp's own llama-server (one thread,
``replaykit engine start``'s settings) serving SmolLM2-135M-Instruct; ``--model tiny`` the
random-weight model, ``--engine llama-cpp-python`` llama-cpp-python's server. Agent-like episodes (a stock ``openai.OpenAI``
client, the history growing every call, ``max_tokens`` replies) run in two ways,
interleaved episode by episode so both see the same load: **direct** (client → server)
and **recorded** (the same client inside replaykit's episode cassette, recording
every exchange; store I/O excluded). Figures per call, CPU time:

- the engine's own time: the server process's CPU during the direct episodes;
- the client's CPU, direct and recorded; their difference is replaykit's recording cost;
- the ratio of that cost to the engine's time (the verdict: target <= 1%).

Usage: python benchmarks/engine_overhead.py [--episodes 12] [--calls 6] [--max-tokens 16]
       [--model smollm2|tiny] [--engine llama-server|llama-cpp-python]
Needs scripts/setup-llama-server.sh (or, for llama-cpp-python, scripts/setup-engine.sh).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai
import psutil

from replaykit.capture.recorder import episode_cassette
from replaykit.capture.tape import Tape
from replaykit.models.engines import ENGINES
from replaykit.models.model_files import model_file
from replaykit.models.tiny_model import write_tiny_model
from replaykit.testing.llama_server import LlamaServer, engine_missing

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import load_line, verdict

TARGET = 0.01  # recording may add at most 1% of the engine's own CPU time per call


def agent(llm: openai.OpenAI, episode: int, calls: int, max_tokens: int, model: str = "tiny.gguf") -> None:
    messages: list[Any] = [
        {"role": "system", "content": "You are a benchmark agent."},
        {"role": "user", "content": f"Episode {episode}: list the files."},
    ]
    for step in range(calls):
        reply = llm.chat.completions.create(
            model=model, messages=messages, max_tokens=max_tokens, temperature=0, seed=step
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        messages.append({"role": "user", "content": f"step {step}: exit_code 0"})


def server_cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def run(server: LlamaServer, episodes: int, calls: int, max_tokens: int) -> dict[str, float]:
    assert server.proc is not None
    engine = psutil.Process(server.proc.pid)
    llm = openai.OpenAI(base_url=server.base_url, api_key="no-key", max_retries=0)
    client: dict[str, list[float]] = {"direct": [], "recorded": []}
    engine_per_call: list[float] = []
    walls: dict[str, list[float]] = {"direct": [], "recorded": []}
    for i in range(episodes):
        order = ("direct", "recorded") if i % 2 == 0 else ("recorded", "direct")
        for mode in order:
            e0, c0, w0 = server_cpu(engine), time.process_time(), time.perf_counter()
            if mode == "direct":
                agent(llm, i, calls, max_tokens, server.model)
            else:
                tape = Tape(f"bench-{i}")
                with episode_cassette(tape.label, tape):
                    agent(llm, i, calls, max_tokens, server.model)
                assert sum(1 for e in tape.events if e.kind == "llm") == calls
            client[mode].append((time.process_time() - c0) / calls)
            walls[mode].append((time.perf_counter() - w0) / calls)
            if mode == "direct":
                engine_per_call.append((server_cpu(engine) - e0) / calls)
    costs = [r - d for r, d in zip(client["recorded"], client["direct"], strict=True)]
    return {
        "engine_ms": statistics.median(engine_per_call) * 1e3,
        "direct_ms": statistics.median(client["direct"]) * 1e3,
        "recorded_ms": statistics.median(client["recorded"]) * 1e3,
        "overhead_ms": statistics.median(costs) * 1e3,
        "wall_direct_ms": statistics.median(walls["direct"]) * 1e3,
        "wall_recorded_ms": statistics.median(walls["recorded"]) * 1e3,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=12, help="episodes per mode (interleaved)")
    parser.add_argument("--calls", type=int, default=6, help="calls per episode")
    parser.add_argument("--max-tokens", type=int, default=16, help="max_tokens of every reply")
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="smollm2", help="the model served")
    parser.add_argument("--engine", choices=ENGINES, default="llama-server", help="the engine serving it")
    args = parser.parse_args()
    missing = engine_missing(args.engine)
    if missing:
        print(f"Error: {missing}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="replaykit-engine-bench-") as tmp:
        model = (
            model_file("smollm2") if args.model == "smollm2" else write_tiny_model(Path(tmp) / "tiny.gguf")
        )
        log = Path(tmp) / "server.log"
        with LlamaServer(model, n_ctx=2048, log_path=log, engine=args.engine, alias=args.model) as server:
            run(server, 1, 2, args.max_tokens)  # warm up: first evaluation, imports, connections
            r = run(server, args.episodes, args.calls, args.max_tokens)
    share = r["overhead_ms"] / r["engine_ms"] if r["engine_ms"] > 0 else float("inf")
    print(load_line())
    print(
        f"{args.episodes} episodes × {args.calls} calls per mode, max_tokens {args.max_tokens}, "
        f"{args.engine} (1 thread) serving {args.model}; medians per call, CPU time"
    )
    print(f"engine's own time per call        {r['engine_ms']:8.2f} ms  (server process CPU)")
    print(f"client, direct                    {r['direct_ms']:8.2f} ms")
    print(f"client, recorded by replaykit     {r['recorded_ms']:8.2f} ms")
    print(f"recording overhead per call       {r['overhead_ms']:+8.2f} ms")
    print(
        f"overhead / engine time            {share:+8.2%}  (target <= {TARGET:.0%}: {verdict(share <= TARGET)})"
    )
    print(f"wall per call: direct {r['wall_direct_ms']:.1f} ms, recorded {r['wall_recorded_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
