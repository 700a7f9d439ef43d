"""One episode as one Harbor trial folder (``report/harbor_jobs.py`` writes the job around it).

What a trial holds, as ``harbor run`` writes it:

* ``config.json`` (Harbor's ``TrialConfig``) and ``result.json`` (``TrialResult``): the task,
  the agent (the harness, named by its repo's folder with its SHA as version, or the named
  agent and its version), the model, the environment kind, token usage from the endpoint's
  ``usage``, ``cost_usd`` from the config's ``model.pricing`` (absent without a price), every
  named reward of the verifier (``verifier_result.rewards``), an infra episode's failure as
  ``exception_info`` (``ReplaykitInfraFailure``), and a multi-step task's ``step_results``;
* ``verifier/``: ``reward.txt`` (``reward.json`` for several named rewards), ``test-stdout.txt``
  and ``test-stderr.txt`` as the verifier wrote them (episodes recorded before replaykit kept
  them say so in ``test-stdout.txt`` and give the grade's detail); ``steps/NAME/verifier/`` for
  each step of a multi-step task;
* ``agent/``: ``trajectory.json`` (ATIF, ``atif.py``) and ``transcript.json`` (the episode as
  ``cassettes show ID --transcript --json`` gives it).

Everything is derived from the stored episode: ids from cassette ids, the one time its
first-record time.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import NotRequired, TypedDict

from replaykit.cassette.events import Episode, usage_count, usage_reports
from replaykit.core.meta import StepVerifierMeta, VerifierMeta
from replaykit.core.run_doc import EpisodeSummary, RunDoc
from replaykit.models.config import ModelPrice
from replaykit.report.atif import trajectory
from replaykit.report.transcript import OUTPUT_CAP, episode_summary, transcript

INFRA = "ReplaykitInfraFailure"
DATASET = "replaykit"
HARNESS = "replaykit-harness"  # the agent's name when the harness repo's folder says nothing
_UNKEPT = "[replaykit: this episode was recorded before its verifier's output was kept; the grade says:]\n"


class HarborEnvironment(TypedDict):
    """Harbor's ``EnvironmentConfig`` (``environment_of``)."""

    type: str | None
    import_path: NotRequired[str]
    kwargs: NotRequired[dict[str, str]]


class HarborAgent(TypedDict):
    """Harbor's ``AgentConfig`` as a trial's config names it."""

    name: str
    model_name: str


class HarborTaskRef(TypedDict):
    path: str
    source: str


class TrialConfig(TypedDict):
    """A trial's ``config.json`` (Harbor's ``TrialConfig``)."""

    task: HarborTaskRef
    trial_name: str
    trials_dir: str
    agent: HarborAgent
    environment: HarborEnvironment
    job_id: str


class ExceptionInfo(TypedDict):
    exception_type: str
    exception_message: str
    exception_traceback: str
    occurred_at: str


class VerifierResult(TypedDict):
    rewards: dict[str, float]


class StepResult(TypedDict):
    """One step of a multi-step task (Harbor's ``step_results``)."""

    step_name: str
    verifier_result: VerifierResult | None
    exception_info: ExceptionInfo | None


class AgentResult(TypedDict):
    """Token usage (None: the endpoint reported none) and the cost, when the model has a price."""

    n_input_tokens: int | None
    n_cache_tokens: int | None
    n_output_tokens: int | None
    cost_usd: NotRequired[float]


class ModelInfo(TypedDict):
    name: str
    provider: None


class AgentInfo(TypedDict):
    name: str
    version: str
    model_info: ModelInfo


class TaskId(TypedDict):
    path: str


class TrialResult(TypedDict):
    """A trial's ``result.json`` (Harbor's ``TrialResult``), in Harbor's key order."""

    id: str
    task_name: str
    trial_name: str
    trial_uri: str
    task_id: TaskId
    source: str
    task_checksum: str
    config: TrialConfig
    agent_info: AgentInfo
    agent_result: AgentResult
    verifier_result: VerifierResult | None
    exception_info: ExceptionInfo | None
    started_at: str
    finished_at: str
    step_results: list[StepResult] | None


class Trial(TypedDict):
    """One trial: its folder's name, its two documents and the files beside them."""

    name: str
    config: TrialConfig
    result: TrialResult
    files: dict[str, str]  # path under the trial folder -> text


def uuid_of(text: str) -> str:
    return str(uuid.UUID(text[:32].ljust(32, "0")))


def agent_of(run: RunDoc, episode: Episode) -> tuple[str, str]:
    """(name, version) Harbor shows as the agent: a named agent's, else the harness's."""
    named = episode.meta.get("agent")
    if named:
        return str(named["name"]), str(named["version"])
    return Path(run.harness_repo).name or HARNESS, run.harness_sha


def environment_of(episode: Episode) -> HarborEnvironment:
    """Harbor's ``EnvironmentConfig`` for the episode's kind: ``docker`` is Harbor's own type;
    any other kind (``local``) has none in Harbor 0.25's enum, so it is named by import path
    (and the kind in ``kwargs``) with no type, never as ``docker``.

    Why ``harbor view`` cannot list it as ``local`` (Harbor 0.25.0): ``EnvironmentType``
    (harbor/models/environment_type.py) has no such member; ``EnvironmentConfig.type`` is
    ``EnvironmentType | None`` (harbor/models/trial/config.py, class EnvironmentConfig); the
    job list's Environment column is ``config.environment.type.value`` or nothing
    (harbor/viewer/server.py, ``_get_all_job_summaries``); and a config that fails validation is
    dropped whole (harbor/viewer/scanner.py, ``get_job_config`` returns None), losing the
    agent and model too. So the column shows ``-``; the job's and each trial's Config show
    the import path and ``replaykit_kind``."""
    kind = str((episode.meta.get("environment") or {}).get("kind") or "local")
    if kind == "docker":
        return {"type": "docker"}
    path = "replaykit.envs.local:LocalEnv" if kind == "local" else f"replaykit env kind {kind}"
    return {"type": None, "import_path": path, "kwargs": {"replaykit_kind": kind}}


def token_usage(episode: Episode) -> tuple[int | None, int | None, int | None]:
    """(input, cached input, output) tokens the endpoint reported (None: it reported none)."""
    found, n_in, n_cache, n_out = False, 0, 0, 0
    for usage in (u for event in episode.llm_events for u in usage_reports(event)):
        found = True
        n_in += usage_count(usage, "prompt_tokens", "input_tokens")
        n_out += usage_count(usage, "completion_tokens", "output_tokens")
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
        n_cache += usage_count(details, "cached_tokens") if isinstance(details, Mapping) else 0
    return (n_in, n_cache, n_out) if found else (None, None, None)


def _verifier_files(rewards: dict[str, float], stdout: str, stderr: str, prefix: str) -> dict[str, str]:
    reward = (
        {f"{prefix}verifier/reward.json": json.dumps(rewards, indent=2) + "\n"}
        if len(rewards) > 1 or set(rewards) - {"reward"}
        else {f"{prefix}verifier/reward.txt": f"{rewards['reward']:g}\n"}
        if rewards
        else {}
    )
    return {
        **reward,
        f"{prefix}verifier/test-stdout.txt": stdout,
        f"{prefix}verifier/test-stderr.txt": stderr,
    }


def _exception(detail: str, when: str) -> ExceptionInfo:
    return {
        "exception_type": INFRA,
        "exception_message": detail,
        "exception_traceback": "",
        "occurred_at": when,
    }


def _step_result(step: StepVerifierMeta, when: str) -> StepResult:
    return {
        "step_name": step["name"],
        "verifier_result": None
        if step["infra_failure"]
        else {"rewards": step["rewards"] or {"reward": step["reward"]}},
        "exception_info": _exception(step["detail"], when) if step["infra_failure"] else None,
    }


def _agent_result(episode: Episode, price: ModelPrice | None) -> AgentResult:
    n_in, n_cache, n_out = token_usage(episode)
    result: AgentResult = {
        "n_input_tokens": n_in,
        "n_cache_tokens": n_cache or None,
        "n_output_tokens": n_out,
    }
    if price is not None and n_in is not None and n_out is not None:
        result["cost_usd"] = round(price.cost(n_in, n_out, n_cache or 0), 10)
    return result


def trial(
    run: RunDoc, summary: EpisodeSummary, episode: Episode, when: str, job: Path, price: ModelPrice | None
) -> Trial:
    """The trial of one episode of ``run`` (``when``: its first-record time, Harbor's format)."""
    name = f"{summary.task_id}__{summary.cassette_id[:8]}"
    task_path = str(episode.meta.get("task", {}).get("path") or summary.task_id)
    agent, version = agent_of(run, episode)
    model = run.model.name
    grade = episode.grade
    detail = grade.detail if grade is not None else "no grade recorded"
    config: TrialConfig = {
        "task": {"path": task_path, "source": DATASET},
        "trial_name": name,
        "trials_dir": str(job),
        "agent": {"name": agent, "model_name": model},
        "environment": environment_of(episode),
        "job_id": uuid_of(run.run_id * 2),
    }
    kept = episode.meta.get("verifier")
    rewards = (kept["rewards"] if kept else None) or {"reward": summary.reward or 0.0}
    result: TrialResult = {
        "id": uuid_of(summary.cassette_id),
        "task_name": summary.task_id,
        "trial_name": name,
        "trial_uri": (job / name).resolve().as_uri(),
        "task_id": {"path": task_path},
        "source": DATASET,
        "task_checksum": str(episode.key.task_digest),
        "config": config,
        "agent_info": {"name": agent, "version": version, "model_info": {"name": model, "provider": None}},
        "agent_result": _agent_result(episode, price),
        "verifier_result": None if summary.infra_failure else {"rewards": rewards},
        "exception_info": _exception(detail, when) if summary.infra_failure else None,
        "started_at": when,
        "finished_at": when,
        "step_results": [_step_result(s, when) for s in kept["steps"]]
        if kept and kept.get("steps")
        else None,
    }
    files = _trial_files(run, episode, summary, kept, detail, (agent, version, model))
    return {"name": name, "config": config, "result": result, "files": files}


def _trial_files(
    run: RunDoc,
    episode: Episode,
    summary: EpisodeSummary,
    kept: VerifierMeta | None,
    detail: str,
    who: tuple[str, str, str],
) -> dict[str, str]:
    agent, version, model = who
    why = str(episode.meta.get("unprepared") or detail)
    doc = {"episode": episode_summary(summary.cassette_id, episode), "turns": transcript(episode, OUTPUT_CAP)}
    files = {
        "agent/trajectory.json": json.dumps(trajectory(episode, agent, version, model, why), indent=2) + "\n",
        "agent/transcript.json": json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n",
    }
    if summary.infra_failure and not kept:
        return files
    rewards = (kept["rewards"] if kept else None) or {"reward": summary.reward or 0.0}
    if kept and not kept.get("steps"):
        files.update(_verifier_files(rewards, kept["stdout"], kept["stderr"], ""))
    elif kept:
        for step in kept["steps"]:
            step_rewards = step["rewards"] or ({} if step["infra_failure"] else {"reward": step["reward"]})
            files.update(
                _verifier_files(step_rewards, step["stdout"], step["stderr"], f"steps/{step['name']}/")
            )
    else:
        files.update(_verifier_files(rewards, _UNKEPT + detail + "\n", "", ""))
    return files
