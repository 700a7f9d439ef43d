"""Benchmark: record then replay a synthetic agent run of >= 2,000 LLM calls.

Agent-like episodes (the chat history grows every call, 25 calls per episode) run
against the reference model server on loopback. Prints calls/s for a plain
un-recorded baseline, for recording (into a fresh store) and for offline replay,
the ratios against the baseline measured in the same process, and stored bytes
per call. Usage: python benchmarks/record_replay.py [--episodes 80] [--calls 25]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import openai

from replaykit.cassette.events import Episode, GradeEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.capture.recorder import episode_cassette
from replaykit.cassette.store import Store
from replaykit.core.determinism import canonical_json
from replaykit.capture.tape import Tape
from replaykit.envs.base import Grade
from replaykit.models.reference.server import ReferenceServer

FILLER = "Observation: " + "the build log line repeats with small variations. " * 4


def agent(llm: openai.OpenAI, episode: int, calls: int) -> None:
    messages = [
        {"role": "system", "content": "You are a benchmark agent. " * 10},
        {"role": "user", "content": f"Episode {episode}: keep going."},
    ]
    for step in range(calls):
        reply = llm.chat.completions.create(
            model="reference-strong", messages=messages, seed=episode * 1000 + step
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        messages.append({"role": "user", "content": f"step {step}: {FILLER}"})


def key(i: int) -> CassetteKey:
    return CassetteKey(
        "0" * 40, f"bench-{i}", "0" * 64, ModelId("reference-strong", "builtin", "sim-1"), i, "bench"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=80)
    parser.add_argument("--calls", type=int, default=25)
    args = parser.parse_args()
    total = args.episodes * args.calls
    offline = "http://127.0.0.1:9/v1"

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "store")
        with ReferenceServer() as server:
            live = openai.OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)
            t0 = time.perf_counter()
            for i in range(args.episodes):
                agent(live, i, args.calls)
            baseline = time.perf_counter() - t0

            t0 = time.perf_counter()
            for i in range(args.episodes):
                tape = Tape(key(i).id)
                with episode_cassette(tape.label, tape):
                    agent(live, i, args.calls)
                tape.record(GradeEvent(Grade(1.0, True)))
                store.put_episode(Episode(key(i), tape.events))
            record = time.perf_counter() - t0
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        stored = sum(p.stat().st_size for p in (Path(tmp) / "store").glob("index.db*"))

        # replay: the server is stopped; every response is served from the store
        t0 = time.perf_counter()
        identical, raw = 0, 0
        for i in range(args.episodes):
            episode = store.get_episode(key(i).id)
            tape = Tape(episode.id, recorded=list(episode.events))
            with episode_cassette(tape.label, tape):
                agent(openai.OpenAI(base_url=offline, api_key="x", max_retries=0), i, args.calls)
            tape.play_grade()
            identical += tape.digest == episode.digest
            raw += sum(len(e.content) + len(canonical_json(e.body)) for e in episode.llm_events)
        replay = time.perf_counter() - t0

    print(f"calls: {total} ({args.episodes} episodes x {args.calls} calls, history growing every call)")
    print(f"baseline (no recording): {total / baseline:8.1f} calls/s")
    print(
        f"record:                  {total / record:8.1f} calls/s  ({baseline / record:.2f}x baseline speed)"
    )
    print(
        f"replay (offline):        {total / replay:8.1f} calls/s  ({baseline / replay:.2f}x baseline speed)"
    )
    print(f"replayed identically:    {identical}/{args.episodes} episodes")
    print(
        f"stored bytes per call:   {stored / total:8.0f} B  (the requests+responses themselves: {raw / total:.0f} B per call)"
    )


if __name__ == "__main__":
    main()
