"""Export runs as Inspect AI eval logs, through inspect_ai's own log API, so `inspect view` browses them.

    export_inspect(store, "RUN_OR_TRAINING_OR_CASSETTE_ID", Path("logs/"))

One log per run (a training: one per run it measured; a verdict or compare result:
its runs; a cassette: a log with that one episode). One sample per episode: id =
task, epoch = the seed's place in the panel (1-based), messages = the conversation
with each message once (the transcript's new messages and replies, in order),
score ``reward`` (the verifier's), metadata = harness SHA, seed, cassette id,
digest, steps, tokens. Needs the optional extra ``replaykit[inspect]``.

File names are Inspect's own, ``{created}_{task}_{id}.json`` (timestamp first, e.g.
``2026-12-01T08-55-18+00-00_quickstart_80f06b2677ea89a0.json``): ``list_eval_logs`` and
``inspect view`` list only names that start with a timestamp. The header carries the
model's token usage (``stats.model_usage``) and the reward metrics, so a listing shows
the model and the scores without reading the samples.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, TypedDict

from replaykit.cassette.backend import BrowseStore, DocumentStore, EpisodeStore
from replaykit.core.errors import CassetteNotFound, ReplaykitError
from replaykit.report.documents import Turn
from replaykit.report.transcript import episode_summary, transcript

SCORER = "replaykit_verifier"


def _inspect() -> Any:
    try:
        import inspect_ai.log as log
    except ImportError:
        raise ReplaykitError("--format inspect needs inspect_ai: pip install 'replaykit[inspect]'") from None
    return log


def _messages(turns: list[Turn], prefix: str) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall

    out: list[Any] = []
    for turn in turns:
        if turn["kind"] != "call":
            continue
        for m in turn["new"] + turn["reply"]:
            role, text = m["role"], m.get("content") or ""
            mid = f"{prefix}-{len(out)}"  # stable ids: the same cassette exports to the same bytes
            if role in ("system", "developer"):
                out.append(ChatMessageSystem(id=mid, content=text))
            elif role == "assistant":
                calls = []
                for c in m.get("tool_calls") or []:
                    try:
                        args = json.loads(c["arguments"] or "{}")
                    except ValueError:
                        args = {"input": c["arguments"]}
                    calls.append(
                        ToolCall(
                            id=c["id"],
                            function=c["name"],
                            arguments=args if isinstance(args, dict) else {"input": args},
                        )
                    )
                out.append(ChatMessageAssistant(id=mid, content=text, tool_calls=calls or None))
            elif role == "tool":
                out.append(ChatMessageTool(id=mid, content=text, tool_call_id=m.get("tool_call_id")))
            elif role == "user":
                out.append(ChatMessageUser(id=mid, content=text))
            else:  # reasoning summaries, raw items: kept, labelled
                out.append(ChatMessageUser(id=mid, content=f"[{role}] {text}"))
    return out


def _usage(turns: list[Turn]) -> tuple[int, int, int]:
    """Input, output and total tokens the endpoint reported over an episode's calls."""
    tokens_in = tokens_out = total = 0
    for turn in turns:
        usage = turn["usage"] or {} if turn["kind"] == "call" else {}
        if not isinstance(usage, dict):
            continue
        i = int(usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0)
        o = int(usage.get("completion_tokens", usage.get("output_tokens", 0)) or 0)
        tokens_in, tokens_out, total = (
            tokens_in + i,
            tokens_out + o,
            total + int(usage.get("total_tokens", i + o) or 0),
        )
    return tokens_in, tokens_out, total


def log_name(created: str, task: str, log_id: str) -> str:
    """Inspect's file name for a log: ``{created}_{task}_{id}.json``, each part without
    ``_``, ``:`` or ``/`` (so Inspect splits it back into timestamp, task and id)."""

    def clean(part: str) -> str:
        return re.sub(r"[^A-Za-z0-9.+-]", "-", part)

    return f"{clean(created)}_{clean(task)}_{clean(log_id)}.json"


def _sample(
    store: EpisodeStore, cassette_id: str, epoch: int
) -> tuple[Any, float | None, bool, tuple[int, int, int]]:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage
    from inspect_ai.scorer import Score

    episode = store.get_episode(cassette_id)
    summary = episode_summary(cassette_id, episode)
    turns = transcript(episode)
    usage = _usage(turns)
    messages = _messages(turns, cassette_id[:12])
    first_user = next((m.text for m in messages if m.role == "user"), "")
    last = next(
        (m for m in reversed(messages) if m.role == "assistant"),
        ChatMessageAssistant(id=f"{cassette_id[:12]}-none", content=""),
    )
    grade = episode.grade
    reward = grade.reward if grade else None
    scores = {}
    if grade is not None:
        scores["reward"] = Score(
            value=reward if reward is not None else 0.0,
            explanation=grade.detail,
            metadata={"passed": grade.passed, "infra_failure": grade.infra_failure},
        )
    sample = EvalSample(
        id=summary["task_id"],
        epoch=epoch,
        input=first_user,
        target="",
        messages=messages,
        output=ModelOutput(
            model=summary["model"], choices=[ChatCompletionChoice(message=last, stop_reason="stop")]
        ),
        scores=scores,
        model_usage={
            f"replaykit/{summary['model']}": ModelUsage(
                input_tokens=usage[0], output_tokens=usage[1], total_tokens=usage[2]
            )
        },
        metadata={
            "harness_sha": summary["harness_sha"],
            "seed": summary["seed"],
            "cassette_id": cassette_id,
            "digest": summary["digest"],
            "steps": summary["steps"],
            "llm_calls": summary["llm_calls"],
            "tokens": summary["tokens"],
            "passed": bool(grade and grade.passed),
            "infra_failure": bool(grade and grade.infra_failure),
        },
    )
    return sample, reward, bool(grade and grade.passed), usage


def _log(
    store: EpisodeStore,
    name: str,
    run_id: str,
    model: str,
    harness_sha: str,
    created: str,
    episodes: list[tuple[str, int]],
    extra: dict[str, str],
) -> Any:
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalRevision,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelUsage

    samples, rewards, passed = [], [], []
    totals = [0, 0, 0]
    for cassette_id, epoch in episodes:
        sample, reward, ok, usage = _sample(store, cassette_id, epoch)
        samples.append(sample)
        rewards.append(reward or 0.0)
        passed.append(1.0 if ok else 0.0)
        totals = [a + b for a, b in zip(totals, usage, strict=True)]
    scored = sum(1 for s in samples if s.scores)
    metrics = {
        "mean": EvalMetric(name="mean", value=sum(rewards) / max(len(rewards), 1)),
        "accuracy": EvalMetric(name="accuracy", value=sum(passed) / max(len(passed), 1)),
    }
    epochs = max((e for _, e in episodes), default=1)
    spec = EvalSpec(
        created=created,
        task=f"replaykit/{name}",
        task_id=run_id,
        run_id=run_id,
        eval_id=run_id,
        dataset=EvalDataset(name=name, samples=len({s.id for s in samples})),
        model=f"replaykit/{model}",
        config=EvalConfig(epochs=epochs),
        revision=EvalRevision(type="git", origin="replaykit-harness", commit=harness_sha),
        metadata={"harness_sha": harness_sha, "replaykit_run": run_id, **extra},
    )
    results = EvalResults(
        total_samples=len(samples),
        completed_samples=len(samples),
        scores=[
            EvalScore(
                name="reward",
                scorer=SCORER,
                metrics=metrics,
                scored_samples=scored,
                unscored_samples=len(samples) - scored,
            )
        ],
    )
    stats = EvalStats(
        started_at=created,
        completed_at=created,
        model_usage={
            f"replaykit/{model}": ModelUsage(
                input_tokens=totals[0], output_tokens=totals[1], total_tokens=totals[2]
            )
        },
    )
    return EvalLog(eval=spec, status="success", results=results, stats=stats, samples=samples)


def _run_ids(store: DocumentStore, root_id: str) -> list[str] | None:
    """The runs under a stored document (None when the id is not a document)."""
    try:
        kind = store.doc_kind(root_id)
    except CassetteNotFound:
        return None
    if kind == "measure":
        return [store.get_run(root_id).run_id]
    doc = store.get_doc(root_id, kind=kind)
    runs = doc.get("runs")
    if not isinstance(runs, list) or not runs:
        raise ReplaykitError(
            f"{root_id!r} is a {kind} with no runs; export a run, training, verdict, compare result or cassette"
        )
    return [r for r in runs if isinstance(r, str)]  # a verdict of an unmeasured candidate names None


class InspectFile(TypedDict):
    path: str
    run_id: str  # the run (or cassette) the log holds
    samples: int


class InspectExport(TypedDict):
    """What ``cassettes export ID --format inspect`` wrote (and prints with ``--json``)."""

    root: str
    folder: str
    files: list[InspectFile]


def export_inspect(store: BrowseStore, root_id: str, folder: Path) -> InspectExport:
    """Write one Inspect eval log (JSON) per run under ``folder``; returns what was written."""
    log_api = _inspect()
    created_at = {r["id"]: r["created_at"] for r in store.list_runs()}
    logs: list[tuple[str, Any]] = []
    run_ids = _run_ids(store, root_id)
    if run_ids is None:
        cid = store.resolve_id("cassettes", root_id, what="run, training or cassette")
        row = store.cassette_row(cid)
        logs.append(
            (
                cid,
                _log(
                    store,
                    row["task_id"],
                    cid,
                    row["model"],
                    row["harness_sha"],
                    row["created_at"],
                    [(cid, 1)],
                    {},
                ),
            )
        )
    else:
        for run_id in run_ids:
            run = store.get_run(run_id)
            seeds = list(dict.fromkeys(run.panel.seeds or [e.seed for e in run.episodes]))
            episodes = [(e.cassette_id, seeds.index(e.seed) + 1) for e in run.episodes]
            extra = {"endpoint": run.model.endpoint, "config_digest": run.config_digest}
            logs.append(
                (
                    run_id,
                    _log(
                        store,
                        run.name or "run",
                        run_id,
                        run.model.name,
                        run.harness_sha,
                        created_at.get(run_id, ""),
                        episodes,
                        extra,
                    ),
                )
            )
    if folder.exists() and not folder.is_dir():
        raise ReplaykitError(f"{folder} is a file; --format inspect writes a folder of logs (-o DIR)")
    folder.mkdir(parents=True, exist_ok=True)
    files: list[InspectFile] = []
    for log_id, log in logs:
        path = folder / log_name(log.eval.created, log.eval.task.rsplit("/", 1)[-1], log_id)
        log_api.write_eval_log(log, str(path), format="json")
        files.append({"path": str(path), "run_id": log_id, "samples": len(log.samples or [])})
    return {"root": root_id, "folder": str(folder), "files": files}
