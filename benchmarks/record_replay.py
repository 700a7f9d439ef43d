"""Benchmark: record then replay a synthetic agent run of >= 2,000 LLM calls.

Agent-like episodes (the chat history grows every call, 25 calls per episode) run
against the reference model server on loopback. Prints calls/s for a plain
un-recorded baseline, for recording (into a fresh store) and for offline replay,
the ratios against the baseline measured in the same process, and stored bytes
per call. Per episode the three modes run back to back (baseline and record in
alternating order, then the replay of what was just recorded), so every ratio pairs
measurements taken under the same load; ratios are of CPU time (this process: the
client, the recorder and the in-process reference server), medians over episodes.
Usage: python benchmarks/record_replay.py [--episodes 80] [--calls 25]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import openai

from replaykit.capture.recorder import episode_cassette
from replaykit.capture.tape import Tape
from replaykit.cassette.events import Episode, GradeEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.store import Store
from replaykit.core.determinism import canonical_json
from replaykit.envs.results import Grade
from replaykit.models.reference.server import ReferenceServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Sample, load_line, sample

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
        times: dict[str, list[Sample]] = {"baseline": [], "record": [], "replay": []}
        identical, raw = 0, 0
        offline_llm = openai.OpenAI(base_url=offline, api_key="x", max_retries=0)
        with ReferenceServer() as server:
            live = openai.OpenAI(base_url=server.base_url, api_key="bench", max_retries=0)

            def recorded(i: int) -> None:
                tape = Tape(key(i).id)
                with episode_cassette(tape.label, tape):
                    agent(live, i, args.calls)
                tape.record(GradeEvent(Grade(1.0, True)))
                store.put_episode(Episode(key(i), tape.events))

            def replayed(i: int) -> bool:
                # every response is served from the store; the offline URL has no server
                episode = store.get_episode(key(i).id)
                tape = Tape(episode.id, recorded=list(episode.events))
                with episode_cassette(tape.label, tape):
                    agent(offline_llm, i, args.calls)
                tape.play_grade()
                return tape.digest == episode.digest

            for i in range(args.episodes):
                order = ["baseline", "record"] if i % 2 == 0 else ["record", "baseline"]
                for mode in order:
                    fn = (
                        (lambda i=i: agent(live, i, args.calls))
                        if mode == "baseline"
                        else (lambda i=i: recorded(i))
                    )
                    times[mode].append(sample(fn)[0])
                took, same = sample(lambda i=i: replayed(i))
                times["replay"].append(took)
                identical += same
                episode = store.get_episode(key(i).id)
                raw += sum(len(e.content) + len(canonical_json(e.body)) for e in episode.llm_events)
        store.driver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # SQLite: the WAL into index.db
        stored = sum(p.stat().st_size for p in (Path(tmp) / "store").glob("index.db*"))

    def per_call_ms(mode: str) -> str:
        cpu = sum(s.cpu for s in times[mode]) / total * 1000
        wall = sum(s.wall for s in times[mode]) / total * 1000
        return f"{cpu:6.2f} ms CPU per call ({wall:6.2f} ms wall)"

    def vs_base(mode: str) -> float:
        return statistics.median(
            a.cpu / b.cpu for a, b in zip(times[mode], times["baseline"], strict=True) if b.cpu > 0
        )

    print(load_line())
    print(f"calls: {total} ({args.episodes} episodes x {args.calls} calls, history growing every call)")
    print(f"baseline (no recording): {per_call_ms('baseline')}")
    print(f"record:                  {per_call_ms('record')}  ({vs_base('record'):.2f}x baseline CPU)")
    print(f"replay (offline):        {per_call_ms('replay')}  ({vs_base('replay'):.2f}x baseline CPU)")
    print(f"replayed identically:    {identical}/{args.episodes} episodes")
    print(
        f"stored bytes per call:   {stored / total:8.0f} B  (the requests+responses themselves: {raw / total:.0f} B per call)"
    )


if __name__ == "__main__":
    main()
