"""A run in Harbor's job layout: ``DIR/<job>/result.json`` + one trial folder per episode.

``replaykit run CFG --jobs-dir DIR`` (after measuring) and ``replaykit cassettes export RUN
--format harbor -o DIR`` write what ``harbor run -o DIR`` writes, so ``harbor view DIR``
and tools reading Harbor's results read a replaykit run:

* ``DIR/replaykit-<run id>/config.json`` (the job: name, folder, the panel's task paths)
  and ``result.json`` (Harbor's ``JobResult``: trial counts, per agent × model × dataset
  the reward and exception statistics and pass@k, token totals);
* ``DIR/replaykit-<run id>/<task>__<cassette id[:8]>/config.json`` and ``result.json``
  (Harbor's ``TrialConfig`` and ``TrialResult``: the task, the agent — the harness, named
  ``replaykit-harness`` with its SHA as version — and the model, the verifier's rewards, an
  infra episode's failure as ``exception_info`` of type ``ReplaykitInfraFailure``, token
  usage from the endpoint's ``usage``), plus ``verifier/reward.txt``.

Everything is derived from the store: the same run exports to the same bytes (ids are
derived from cassette ids; times are the cassettes' first-record times, the only wall
times replaykit keeps, so phase timings are absent). pass@k follows Harbor 0.25
(``harbor.utils.pass_at_k``: binary rewards, k = 2, 4, 8, … and 5, 10, … up to the fewest
seeds of a task). Reading the store never writes it; the job folder is written atomically.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, TypedDict

from replaykit.cassette.backend import RunStore
from replaykit.cassette.events import Episode
from replaykit.core.errors import ConfigError
from replaykit.core.records import EpisodeSummary, RunDoc

AGENT = "replaykit-harness"
INFRA = "ReplaykitInfraFailure"
DATASET = "replaykit"


class HarborExport(TypedDict):
    """What ``export_harbor_jobs`` wrote (``--json``)."""

    job_dir: str
    trials: int
    errors: int
    pass_at_k: dict[str, float]


def _uuid(text: str) -> str:
    return str(uuid.UUID(text[:32].ljust(32, "0")))


def _when(created_at: str) -> str:
    """A cassette's first-record time as Harbor writes times (ISO 8601, UTC)."""
    text = created_at.replace(" ", "T")
    return text if text.endswith(("Z", "+00:00")) else text + "Z"


def token_usage(episode: Episode) -> tuple[int | None, int | None]:
    """(input, output) tokens the endpoint reported over the episode (None: it reported none)."""
    found, n_in, n_out = False, 0, 0
    for event in episode.llm_events:
        for line in event.content.decode("utf-8", "replace").splitlines():
            text = line[5:].strip() if line.startswith("data:") else line
            if '"usage"' not in text:
                continue
            try:
                doc = json.loads(text)
            except ValueError:
                continue
            usage = (
                (doc.get("usage") or (doc.get("response") or {}).get("usage"))
                if isinstance(doc, dict)
                else None
            )
            if isinstance(usage, dict):
                found = True
                n_in += int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
                n_out += int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
    return (n_in, n_out) if found else (None, None)


def pass_at_k(successes: dict[str, list[int]]) -> dict[int, float]:
    """Harbor 0.25's pass@k over binary per-task outcomes ({} when none is binary-comparable)."""
    if not successes:
        return {}
    fewest = min(len(s) for s in successes.values())
    ks = sorted({*(2**i for i in range(1, 64) if 2**i <= fewest), *range(5, fewest + 1, 5)})

    def one(n: int, c: int, k: int) -> float:
        if n - c < k:
            return 1.0
        product = 1.0
        for i in range(k):
            product *= (n - c - i) / (n - i)
        return 1.0 - product

    return {k: sum(one(len(s), sum(s), k) for s in successes.values()) / len(successes) for k in ks}


def _trial(run: RunDoc, summary: EpisodeSummary, episode: Episode, when: str, job: Path) -> dict[str, Any]:
    name = f"{summary.task_id}__{summary.cassette_id[:8]}"
    task_path = str(episode.meta.get("task", {}).get("path") or summary.task_id)
    n_in, n_out = token_usage(episode)
    grade = episode.grade
    detail = grade.detail if grade is not None else "no grade recorded"
    config = {
        "task": {"path": task_path, "source": DATASET},
        "trial_name": name,
        "trials_dir": str(job),
        "agent": {"name": AGENT, "model_name": run.model["name"]},
        "job_id": _uuid(run.run_id * 2),
    }
    result: dict[str, Any] = {
        "id": _uuid(summary.cassette_id),
        "task_name": summary.task_id,
        "trial_name": name,
        "trial_uri": (job / name).resolve().as_uri(),
        "task_id": {"path": task_path},
        "source": DATASET,
        "task_checksum": str(episode.key.task_digest),
        "config": config,
        "agent_info": {
            "name": AGENT,
            "version": run.harness_sha,
            "model_info": {"name": run.model["name"], "provider": None},
        },
        "agent_result": {
            "n_input_tokens": n_in,
            "n_cache_tokens": None,
            "n_output_tokens": n_out,
            "cost_usd": None,
        },
        "verifier_result": None if summary.infra_failure else {"rewards": {"reward": summary.reward}},
        "exception_info": None,
        "started_at": when,
        "finished_at": when,
        "step_results": None,
    }
    if summary.infra_failure:
        result["exception_info"] = {
            "exception_type": INFRA,
            "exception_message": detail,
            "exception_traceback": "",
            "occurred_at": when,
        }
    return {"name": name, "config": config, "result": result}


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=4) + "\n", encoding="utf-8")


def check_jobs_dir(jobs_dir: Path | str) -> Path:
    """``jobs_dir`` if a job folder can go there (checked before a run records anything)."""
    jobs = Path(jobs_dir)
    for folder in (jobs, *jobs.parents):
        if folder.exists():
            if not folder.is_dir() or not os.access(folder, os.W_OK):
                raise ConfigError(
                    f"cannot write a Harbor job folder under {jobs}: {folder} is "
                    + ("not a folder" if not folder.is_dir() else "not writable")
                    + "; choose another --jobs-dir (or -o)"
                )
            break
    return jobs


def export_harbor_jobs(store: RunStore, run_id: str, jobs_dir: Path | str) -> HarborExport:
    """Write run ``run_id`` (a unique prefix is enough) as a Harbor job under ``jobs_dir``."""
    check_jobs_dir(jobs_dir)
    run = store.get_run(run_id)  # a unique prefix is enough; the document verified
    jobs = Path(jobs_dir)
    job_name = f"replaykit-{run.run_id}"
    trials, stats = [], _Stats()
    for summary in run.episodes:
        episode = store.get_episode(summary.cassette_id)
        when = _when(store.cassette_row(summary.cassette_id)["created_at"])
        trial = _trial(run, summary, episode, when, jobs / job_name)
        trials.append(trial)
        stats.add(trial["result"])
    times = sorted(t["result"]["started_at"] for t in trials) or [""]
    job_result = {
        "id": _uuid(run.run_id * 2),
        "started_at": times[0].removesuffix("Z"),
        "updated_at": times[-1],
        "finished_at": times[-1],
        "n_total_trials": len(trials),
        "stats": stats.document(f"{AGENT}__{run.model['name']}__{DATASET}"),
    }
    tasks = sorted({t["config"]["task"]["path"] for t in trials})
    job_config = {"job_name": job_name, "jobs_dir": str(jobs), "datasets": [{"path": p} for p in tasks]}
    jobs.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{job_name}-", dir=jobs))
    try:
        _write_json(tmp / "config.json", job_config)
        _write_json(tmp / "result.json", job_result)
        for trial in trials:
            _write_json(tmp / trial["name"] / "config.json", trial["config"])
            _write_json(tmp / trial["name"] / "result.json", trial["result"])
            rewards = trial["result"]["verifier_result"]
            if rewards is not None:
                (tmp / trial["name"] / "verifier").mkdir()
                (tmp / trial["name"] / "verifier" / "reward.txt").write_text(
                    f"{rewards['rewards']['reward']:g}\n"
                )
        target = jobs / job_name
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    evals = job_result["stats"]["evals"]
    (key,) = evals or {"": {"pass_at_k": {}}}
    return {
        "job_dir": str(jobs / job_name),
        "trials": len(trials),
        "errors": job_result["stats"]["n_errored_trials"],
        "pass_at_k": {str(k): v for k, v in (evals[key]["pass_at_k"] if evals else {}).items()},
    }


class _Stats:
    """Harbor's ``JobStats`` of the trials added (one agent × model × dataset)."""

    def __init__(self) -> None:
        self.trials: list[dict[str, Any]] = []

    def add(self, result: dict[str, Any]) -> None:
        self.trials.append(result)

    def document(self, evals_key: str) -> dict[str, Any]:
        rewards: dict[str, dict[float, list[str]]] = defaultdict(lambda: defaultdict(list))
        exceptions: dict[str, list[str]] = defaultdict(list)
        successes: dict[str, list[int]] = defaultdict(list)
        graded = errors = 0
        n_in = n_out = None
        binary = True
        for r in self.trials:
            verifier = r["verifier_result"]
            if verifier is not None:
                graded += 1
                value = verifier["rewards"]["reward"]
                rewards["reward"][value].append(r["trial_name"])
                binary = binary and value in (0, 1)
                successes[r["task_name"]].append(int(value) if value in (0, 1) else 0)
            else:
                successes[r["task_name"]].append(0)
            if r["exception_info"] is not None:
                errors += 1
                exceptions[r["exception_info"]["exception_type"]].append(r["trial_name"])
            usage = r["agent_result"]
            if usage["n_input_tokens"] is not None:
                n_in = (n_in or 0) + usage["n_input_tokens"]
                n_out = (n_out or 0) + usage["n_output_tokens"]
        evals = {
            evals_key: {
                "n_trials": graded,
                "n_errors": errors,
                "metrics": [],
                "pass_at_k": pass_at_k(dict(successes)) if binary else {},
                "reward_stats": {k: dict(v) for k, v in rewards.items()},
                "exception_stats": dict(exceptions),
            }
        }
        return {
            "n_completed_trials": len(self.trials),
            "n_errored_trials": errors,
            "n_running_trials": 0,
            "n_pending_trials": 0,
            "n_cancelled_trials": 0,
            "n_retries": 0,
            "evals": evals if self.trials else {},
            "n_input_tokens": n_in,
            "n_cache_tokens": None,
            "n_output_tokens": n_out,
            "cost_usd": None,
        }
