"""Benchmark: replaykit's own cost per LLM call, beyond the stock openai client.

The stock ``openai.OpenAI`` client runs agent-like episodes (25 calls each, the
history growing every call) against a mock transport that answers instantly — the
floor any replay through the client can reach. Then the same episodes run
(a) recorded: replaykit's episode cassette wraps the same mock transport, and
(b) replayed: the cassette serves every response from the tape, offline.
The difference per call is replaykit's own overhead (interception, request forms,
matching, response building, per-episode cassette setup); store I/O is excluded.
Measured at several sizes to show it stays flat.

Usage: python benchmarks/client_overhead.py [--sizes 100,1000,10000,50000] [--repeats 3]
Targets (issue 13): replay overhead <= 0.2 ms/call, recording overhead <= 0.1 ms/call.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import httpx2
import openai

from replaykit.cassette.events import Episode
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.capture.recorder import episode_cassette
from replaykit.capture.tape import Tape

CALLS = 25
OFFLINE = "http://127.0.0.1:9/v1"


def _answer(request: Any) -> Any:
    body = json.loads(request.content or b"{}")
    n = len(body.get("messages", []))
    payload = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": f"reply to {n} messages"},
            }
        ],
        "usage": {"prompt_tokens": n, "completion_tokens": 4, "total_tokens": n + 4},
    }
    return httpx2.Response(
        200, headers={"content-type": "application/json"}, content=json.dumps(payload).encode()
    )


def _mock_handle(self: Any, request: Any) -> Any:
    request.read()
    return _answer(request)


def agent(llm: openai.OpenAI, episode: int) -> None:
    messages = [
        {"role": "system", "content": "You are a benchmark agent. " * 10},
        {"role": "user", "content": f"Episode {episode}."},
    ]
    for step in range(CALLS):
        reply = llm.chat.completions.create(model="m", messages=messages, seed=episode * 1000 + step)  # type: ignore[arg-type]
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        messages.append({"role": "user", "content": f"step {step}: observation text " * 3})


def key(i: int) -> CassetteKey:
    return CassetteKey("0" * 40, f"bench-{i}", "0" * 64, ModelId("m", "mock"), i, "bench")


def run(episodes: int) -> tuple[float, float, float]:
    """Seconds per call: stock client on the mock transport, recording, replaying.

    The three are interleaved episode by episode (base, record, replay of the same
    episode), so load from other processes on a shared machine hits all three alike;
    all recorded episodes are kept, so memory grows with the size as in a real run."""
    real = httpx2.HTTPTransport.handle_request
    llm = openai.OpenAI(base_url=OFFLINE, api_key="bench", max_retries=0)
    base = record = replay = 0.0
    recorded: list[Episode] = []
    for i in range(episodes):
        httpx2.HTTPTransport.handle_request = _mock_handle  # type: ignore[method-assign]
        try:
            t0 = time.process_time()
            agent(llm, i)
            t1 = time.process_time()
            tape = Tape(key(i).id)
            with episode_cassette(tape.label, tape):
                agent(llm, i)
            t2 = time.process_time()
        finally:
            httpx2.HTTPTransport.handle_request = real  # type: ignore[method-assign]
        recorded.append(Episode(key(i), tape.events))
        episode = recorded[-1]
        t3 = time.process_time()
        replaying = Tape(episode.id, recorded=list(episode.events))
        with episode_cassette(replaying.label, replaying):
            agent(llm, i)
        t4 = time.process_time()
        assert replaying.cursor == len(episode.events)
        base, record, replay = base + (t1 - t0), record + (t2 - t1), replay + (t4 - t3)
    calls = episodes * CALLS
    return base / calls, record / calls, replay / calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000,50000", help="total calls per measurement")
    parser.add_argument(
        "--repeats", type=int, default=3, help="the best of N runs per size (a shared machine is noisy)"
    )
    args = parser.parse_args()
    run(4)  # warm up imports and caches
    print(
        f"{'calls':>7}  {'stock client':>12}  {'record':>9}  {'replay':>9}  {'rec. overhead':>13}  {'replay overhead':>15}"
    )
    for size in [int(s) for s in args.sizes.split(",")]:
        rounds = [run(max(1, size // CALLS)) for _ in range(args.repeats)]
        base, record, replay = (min(r[i] for r in rounds) for i in range(3))
        rec_o, rep_o = (record - base) * 1e3, (replay - base) * 1e3
        print(
            f"{size:>7}  {base * 1e3:>9.3f} ms  {record * 1e3:>6.3f} ms  {replay * 1e3:>6.3f} ms  "
            f"{rec_o:>+10.3f} ms  {rep_o:>+12.3f} ms   (targets: <= 0.1 / <= 0.2 ms: {'met' if rec_o <= 0.1 and rep_o <= 0.2 else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
