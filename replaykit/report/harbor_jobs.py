"""A run in Harbor's job layout: ``DIR/<job>/result.json`` + one trial folder per episode.

``replaykit run CFG --jobs-dir DIR`` (after measuring) and ``replaykit cassettes export RUN
--format harbor -o DIR`` write what ``harbor run -o DIR`` writes, so ``harbor view DIR``
and tools reading Harbor's results read a replaykit run:

* ``DIR/replaykit-<run id>/config.json`` (Harbor's ``JobConfig``: the job's name and folder,
  the panel's task paths, the agent with its model and the environment as each trial's
  config names them: ``harbor_trials.py``) and ``result.json`` (``JobResult``: trial counts,
  per agent × model × dataset the ``mean`` metric as Harbor computes it (one per named reward
  when there are several), reward and exception statistics and pass@k, token and cost totals);
* one trial folder per episode (``harbor_trials.py``: its documents, ``verifier/`` and
  ``agent/trajectory.json`` in ATIF).

Everything is derived from the store: the same run exports to the same bytes (ids are
derived from cassette ids; times are the cassettes' first-record times, the only wall
times replaykit keeps, so phase timings are absent). pass@k and the mean follow Harbor 0.25
(``harbor.utils.pass_at_k``: binary single rewards, k = 2, 4, 8, … and 5, 10, … up to the
fewest seeds of a task; ``harbor.metrics.mean``: an errored trial counts 0). Reading the
store never writes it; the job folder is written atomically.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from replaykit.cassette.backend import RunStore
from replaykit.core.errors import ConfigError
from replaykit.core.files import replace_dir
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress
from replaykit.episodes.run_records import HarborExport
from replaykit.models.config import ModelPrice
from replaykit.report.harbor_trials import (
    DATASET,
    AgentResult,
    HarborAgent,
    HarborEnvironment,
    Trial,
    TrialResult,
    trial,
    uuid_of,
)

if TYPE_CHECKING:
    from replaykit.episodes.config import RunConfig
    from replaykit.episodes.run_records import MeasureResult


class EvalStats(TypedDict):
    """Harbor's ``AgentDatasetStats``: one agent × model × dataset."""

    n_trials: int
    n_errors: int
    metrics: list[dict[str, float]]
    pass_at_k: dict[int, float]
    reward_stats: dict[str, dict[float, list[str]]]  # reward name -> value -> trial names
    exception_stats: dict[str, list[str]]  # exception type -> trial names


class JobStats(TypedDict):
    """Harbor's ``JobStats``."""

    n_completed_trials: int
    n_errored_trials: int
    n_running_trials: int
    n_pending_trials: int
    n_cancelled_trials: int
    n_retries: int
    evals: dict[str, EvalStats]
    n_input_tokens: int | None
    n_cache_tokens: int | None
    n_output_tokens: int | None
    cost_usd: float | None


class JobResult(TypedDict):
    """The job's ``result.json`` (Harbor's ``JobResult``)."""

    id: str
    started_at: str
    updated_at: str
    finished_at: str
    n_total_trials: int
    stats: JobStats


class Dataset(TypedDict):
    path: str


class NoTrial(TypedDict):
    """What a job of no trial names as its agent and environment: ``{}``."""


class JobConfig(TypedDict):
    """The job's ``config.json`` (Harbor's ``JobConfig``): the agent and environment as its
    first trial names them."""

    job_name: str
    jobs_dir: str
    agents: list[HarborAgent | NoTrial]
    environment: HarborEnvironment | NoTrial
    datasets: list[Dataset]


def _when(created_at: str) -> str:
    """A cassette's first-record time as Harbor writes times (ISO 8601, UTC)."""
    text = created_at.replace(" ", "T")
    return text if text.endswith(("Z", "+00:00")) else text + "Z"


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


def mean_metric(rewards: list[dict[str, float] | None]) -> dict[str, float]:
    """Harbor's ``Mean`` metric: ``{"mean": x}`` over one named reward (an errored trial counts
    0), else the mean of each named reward."""
    keys = sorted({k for r in rewards if r is not None for k in r})
    if len(keys) <= 1:
        values = [0.0 if r is None else next(iter(r.values()), 0.0) for r in rewards]
        return {"mean": sum(values) / len(values)}
    return {k: sum(0.0 if r is None else r.get(k, 0.0) for r in rewards) / len(rewards) for k in keys}


def _write_json(path: Path, value: object) -> None:
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


def measure_run(
    config: RunConfig,
    jobs_dir: Path | None = None,
    *,
    record_mode: RecordMode = RecordMode.ONCE,
    harness_ref: str | None = None,
    progress: Progress | None = None,
    keep_going: bool = False,
) -> MeasureResult:
    """``replaykit run``: ``measure(config, report=True)`` (its ``to_json()`` is ``run --json``);
    with ``jobs_dir`` (checked before anything is recorded) the run is also written there as a
    Harbor job, the result's ``harbor_job``."""
    from replaykit.cassette.stores import open_store
    from replaykit.episodes.run import measure

    if jobs_dir is not None:
        check_jobs_dir(jobs_dir)
    result = measure(
        config,
        record_mode=record_mode,
        harness_ref=harness_ref,
        progress=progress,
        keep_going=keep_going,
        report=True,
    )
    if jobs_dir is not None:
        store = open_store(config.store_location, readonly=True)
        try:
            result.harbor_job = export_harbor_jobs(store, result.run.run_id, jobs_dir, config.model.pricing)
        finally:
            store.close()
    return result


def export_harbor_jobs(
    store: RunStore, run_id: str, jobs_dir: Path | str, pricing: dict[str, ModelPrice] | None = None
) -> HarborExport:
    """Write run ``run_id`` (a unique prefix is enough) as a Harbor job under ``jobs_dir``;
    ``pricing`` (``model.pricing``) gives each trial its ``cost_usd``."""
    check_jobs_dir(jobs_dir)
    run = store.get_run(run_id)  # a unique prefix is enough; the document verified
    jobs = Path(jobs_dir)
    job_name = f"replaykit-{run.run_id}"
    model = run.model
    table = pricing or {}
    price = (table.get(f"{model.name}@{model.revision}") if model.revision else None) or table.get(model.name)
    trials: list[Trial] = []
    for summary in run.episodes:
        episode = store.get_episode(summary.cassette_id)
        when = _when(store.cassette_row(summary.cassette_id)["created_at"])
        trials.append(trial(run, summary, episode, when, jobs / job_name, price))
    results = [t["result"] for t in trials]
    times = sorted(r["started_at"] for r in results) or [""]
    stats = job_stats(results)
    job_result: JobResult = {
        "id": uuid_of(run.run_id * 2),
        "started_at": times[0].removesuffix("Z"),
        "updated_at": times[-1],
        "finished_at": times[-1],
        "n_total_trials": len(trials),
        "stats": stats,
    }
    first = trials[0]["config"] if trials else None
    job_config: JobConfig = {
        "job_name": job_name,
        "jobs_dir": str(jobs),
        "agents": [first["agent"] if first else NoTrial()],
        "environment": first["environment"] if first else NoTrial(),
        "datasets": [{"path": p} for p in sorted({t["config"]["task"]["path"] for t in trials})],
    }
    _write_job(jobs, job_name, job_config, job_result, trials)
    one = next(iter(stats["evals"].values()), None)  # one agent × model × dataset, or no trial
    return {
        "job_dir": str(jobs / job_name),
        "trials": len(trials),
        "errors": stats["n_errored_trials"],
        "pass_at_k": {str(k): v for k, v in one["pass_at_k"].items()} if one else {},
        "metrics": one["metrics"] if one else [],
    }


def _write_job(jobs: Path, job_name: str, config: JobConfig, result: JobResult, trials: list[Trial]) -> None:
    """The job folder, written beside its final place and moved there whole."""
    jobs.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{job_name}-", dir=jobs))
    try:
        _write_json(tmp / "config.json", config)
        _write_json(tmp / "result.json", result)
        for t in trials:
            _write_json(tmp / t["name"] / "config.json", t["config"])
            _write_json(tmp / t["name"] / "result.json", t["result"])
            for rel, text in t["files"].items():
                path = tmp / t["name"] / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
        replace_dir(tmp, jobs / job_name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def job_stats(results: list[TrialResult]) -> JobStats:
    """Harbor's ``JobStats`` of the trial results (one agent × model × dataset)."""
    rewards: dict[str, dict[float, list[str]]] = defaultdict(lambda: defaultdict(list))
    exceptions: dict[str, list[str]] = defaultdict(list)
    successes: dict[str, list[int]] = defaultdict(list)
    per_trial: list[dict[str, float] | None] = []
    graded = errors = 0
    binary = True
    for r in results:
        given = r["verifier_result"]["rewards"] if r["verifier_result"] else None
        per_trial.append(given)
        if given is not None:
            graded += 1
            for key, value in given.items():
                rewards[key][value].append(r["trial_name"])
            value = next(iter(given.values()))
            binary = binary and len(given) == 1 and value in (0, 1)
            successes[r["task_name"]].append(int(value) if value in (0, 1) else 0)
        else:
            successes[r["task_name"]].append(0)
        if r["exception_info"] is not None:
            errors += 1
            exceptions[r["exception_info"]["exception_type"]].append(r["trial_name"])
    n_in, n_cache, n_out, cost = _totals([r["agent_result"] for r in results])
    key = (
        f"{results[0]['agent_info']['name']}__{results[0]['agent_info']['model_info']['name']}__{DATASET}"
        if results
        else ""
    )
    evals: dict[str, EvalStats] = {
        key: {
            "n_trials": graded,
            "n_errors": errors,
            "metrics": [mean_metric(per_trial)],
            "pass_at_k": pass_at_k(dict(successes)) if binary else {},
            "reward_stats": {k: dict(v) for k, v in rewards.items()},
            "exception_stats": dict(exceptions),
        }
    }
    return {
        "n_completed_trials": len(results),
        "n_errored_trials": errors,
        "n_running_trials": 0,
        "n_pending_trials": 0,
        "n_cancelled_trials": 0,
        "n_retries": 0,
        "evals": evals if results else {},
        "n_input_tokens": n_in,
        "n_cache_tokens": n_cache,
        "n_output_tokens": n_out,
        "cost_usd": cost,
    }


def _totals(usages: list[AgentResult]) -> tuple[int | None, int | None, int | None, float | None]:
    """Token and cost totals, each None when no trial reported it (as Harbor sums them)."""
    sums: list[float | None] = [None, None, None, None]
    for usage in usages:
        reported = (
            usage["n_input_tokens"],
            usage["n_cache_tokens"],
            usage["n_output_tokens"],
            usage.get("cost_usd"),
        )
        for i, value in enumerate(reported):
            if value is not None:
                sums[i] = (sums[i] or 0) + value
    n_in, n_cache, n_out, cost = sums
    return (
        None if n_in is None else int(n_in),
        None if n_cache is None else int(n_cache),
        None if n_out is None else int(n_out),
        cost,
    )
