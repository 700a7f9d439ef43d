"""Benchmark: what prefix reuse saves when a training is recorded live.

Runs the quickstart training (the built-in reference server, the local environment) from
an empty store twice per round — once with ``model.reuse: prefix``, once with ``none`` —
rounds interleaved (measure.interleaved), and prints for each: the model calls that reached
an endpoint (task model and proposer), the events served from donor cassettes, the CPU time
of the process tree; then the ratio of calls (goal: prefix <= 50% of none), the median
paired CPU ratio, and whether every epoch's decision, candidate SHA, verdict and the final
baseline are the same (goal: identical). On the built-in server it also prints the floor
of any reuse that serves only identical requests: the distinct task-model requests the
training without reuse sent per task, seed, model, config and engine (a request no other
episode sent must be paid, whoever donates), plus the proposer's calls. A real engine's
answers are not byte-reproducible (llama-cpp-python gives each tool call a fresh id, which
the next request repeats), so there a run without reuse bounds nothing. With llama-cpp-python installed
(scripts/setup-engine.sh) the same on the real-model config (configs/quickstart-llama.yaml,
the tiny random-weight model, the quickstart's train section), where reuse is a shared
sample unless a probe found the engine deterministic.

Usage: python benchmarks/live_cost.py [--epochs 5] [--repeats 1] [--no-engine]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.events import LlmEvent
from replaykit.core.determinism import canonical_json
from replaykit.episodes.config import load_config
from replaykit.testing import write_config
from replaykit.train.trainer import Trainer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import Sample, load_line, median_cpu, ratio, sample, verdict

POLICIES = ("prefix", "none")
ROOT = Path(__file__).resolve().parent.parent  # the checkout: its configs/ and envs/


def train(tmp: Path, policy: str, epochs: int, base: str, overrides: dict[str, object]) -> dict[str, Any]:
    """One training from an empty store under ``policy``: what it paid and what it decided."""
    config = load_config(write_config(tmp, {**overrides, "model.reuse": policy}, base=base, root=ROOT))
    notes: list[str] = []  # "epoch 1: candidate fb99ce1725: recorded 16, reused 0 · 80 model call(s)"

    def progress(event: str, data: Any) -> None:
        if event == "note" and ": recorded" in str(data.get("message", "")):
            notes.append(str(data["message"]))

    trainer = Trainer(config=config, progress=progress)
    for loss in trainer.epochs(epochs):
        loss.backward()
        trainer.optimizer.step()
    summary = trainer.summary()
    distinct = distinct_requests(trainer.store)
    trainer.store.close()
    decisions = [(e.epoch, e.decision, e.candidate_sha, e.verdict_id, e.loss) for e in summary.epochs]
    return {
        **trainer.paid.to_dict(),
        "decisions": decisions,
        "final": summary.final_baseline,
        "notes": notes,
        "floor": distinct + trainer.paid.to_dict()["proposer_calls"],
    }


def distinct_requests(store: StoreBackend) -> int:
    """Task-model requests no sound reuse could serve: the distinct request bodies of the
    store's episodes per key but the harness SHA (task, seed, model, config, env) and engine."""
    seen: dict[tuple[str, ...], set[str]] = {}
    for cid, kind in store.index_rows("cassettes", "id, kind"):
        if kind != "episode":
            continue
        episode = store.get_episode(str(cid))
        key, model = episode.key, dict(episode.meta.get("model") or {})
        group = (
            key.task_id,
            key.task_digest,
            str(key.seed),
            key.model.name,
            key.config_digest,
            canonical_json(list(key.extra)),
            canonical_json(model.get("engine")),
        )
        requests = seen.setdefault(group, set())
        requests.update(canonical_json(e.request_form()) for e in episode.events if isinstance(e, LlmEvent))
    return sum(len(r) for r in seen.values())


def compare(label: str, epochs: int, repeats: int, base: str, overrides: dict[str, object]) -> bool:
    """Both policies, ``repeats`` interleaved rounds; prints the figures; True when the goals are met."""
    samples: dict[str, list[Sample]] = {p: [] for p in POLICIES}
    results: dict[str, list[dict[str, Any]]] = {p: [] for p in POLICIES}
    for r in range(repeats):
        for policy in POLICIES[r % 2 :] + POLICIES[: r % 2]:  # alternate which goes first
            with tempfile.TemporaryDirectory() as tmp:
                took, out = sample(lambda p=policy, t=tmp: train(Path(t), p, epochs, base, overrides))  # type: ignore[misc]
            samples[policy].append(took)
            results[policy].append(out)
    print(f"{label}: {epochs} epoch(s) from an empty store, {repeats} round(s)")
    for policy in POLICIES:
        first = results[policy][0]
        print(
            f"  reuse {policy:<6} {first['model_calls']:5d} model calls ({first['task_model_calls']} task model, "
            f"{first['proposer_calls']} proposer) · {first['reused_events']:5d} events served from donors · "
            f"{median_cpu(samples[policy]):7.2f} s CPU"
        )
    print("  per measurement (prefix | none):")
    for a, b in zip(results["prefix"][0]["notes"], results["none"][0]["notes"], strict=False):
        label, _, rest = a.partition(": recorded")
        print(f"    {label:<32} {rest.split('· ', 1)[-1]:<50} | {b.split('· ', 1)[-1]}")
    calls = results["prefix"][0]["model_calls"] / max(results["none"][0]["model_calls"], 1)
    print(
        "  (a candidate shares at most its first requests with a donor: one that edits the system prompt"
        " shares none, one that reformats tool output shares its first call)"
    )
    same = all(
        a["decisions"] == b["decisions"] and a["final"] == b["final"]
        for a in results["prefix"]
        for b in results["none"]
    )
    cpu = ratio(samples["prefix"], samples["none"])
    floor = results["none"][0]["floor"] / max(results["none"][0]["model_calls"], 1)
    print(f"  calls with reuse: {calls:.0%} of without (goal <= 50%: {verdict(calls <= 0.5)})")
    if overrides.get("model.base_url", "builtin") == "builtin":  # byte-reproducible answers
        print(
            f"  floor of any identical-request reuse: {results['none'][0]['floor']} calls, {floor:.0%} of without"
            + (" (the goal is out of reach of sound reuse here)" if floor > 0.5 else "")
        )
    else:  # fresh ids in every answer (llama-cpp-python: tool call 'call__0_bash_cmpl-<uuid>')
        print(
            "  floor of identical-request reuse: none to give (answers here are not byte-reproducible, "
            "so a run without reuse sends requests a run with it never does)"
        )
    print(f"  CPU with reuse: {cpu:.2f} x without (median of paired rounds)")
    print(
        "  decisions, candidate SHAs, verdicts and final baseline: "
        + ("identical" if same else "DIFFERENT")
        + f" (goal identical: {verdict(same)})"
    )
    if not same:
        for policy in POLICIES:
            print(f"    {policy}: {results[policy][0]['decisions']} final {results[policy][0]['final'][:10]}")
    return calls <= 0.5 and same


@contextlib.contextmanager
def llama_overrides(tmp: Path) -> Iterator[dict[str, object] | None]:
    """The real-model config's endpoint (a llama.cpp server on the tiny model), or None without the engine."""
    from replaykit.models.tiny_model import write_tiny_model
    from replaykit.testing.llama_server import LlamaServer, engine_missing

    missing = engine_missing()
    if missing:
        print(f"real-model config: skipped ({missing})")
        yield None
        return
    train_section = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())["train"]
    with LlamaServer(write_tiny_model(tmp / "tiny.gguf")) as server:
        yield {"model.base_url": server.base_url, "model.name": server.model, "train": train_section}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5, help="epochs of the quickstart training (default 5)")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds of both policies")
    parser.add_argument("--no-engine", action="store_true", help="skip the real-model config")
    args = parser.parse_args()
    print(load_line())
    with tempfile.TemporaryDirectory() as tmp:  # warm up (imports, compiled harness code): not measured
        train(Path(tmp), "none", 1, "quickstart.yaml", {"panel.seeds": [0]})
    compare("quickstart (built-in reference server)", args.epochs, args.repeats, "quickstart.yaml", {})
    if args.no_engine:
        return
    with tempfile.TemporaryDirectory() as tmp, llama_overrides(Path(tmp)) as overrides:
        if overrides is not None:
            compare(
                "real-model config (llama.cpp, tiny model)",
                args.epochs,
                args.repeats,
                "quickstart-llama.yaml",
                overrides,
            )


if __name__ == "__main__":
    main()
