"""Re-executing one task's recorded episodes for real: deterministic, forked or error.

``check_task`` runs each episode's recorded environment actions again, in order, in a
fresh environment of the recorded kind (``make_env`` on the recorded ``env`` table; no
model, the actions are in the cassette), multi-step tasks staged and graded step by step
as recorded. Observations (stdout, stderr, exit code, timeout) are compared after narrow
scrubbing (``observation_scrub.scrub``) and so is the grade (reward, passed, infra
failure); the first difference makes the task ``forked``. An episode its env kind says can
never be certified (``EnvKind.extras.forked_reason``: the docker kind's live network) is
``forked`` without re-executing anything; one with recorded exchanges runs behind what
its kind serves of them (``episodes/network.py``'s ``serving``), and a request never
recorded is an error naming the URL. Writes nothing, so it runs on any worker
(``CertifyJob``); the certificates are ``certify.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from replaykit.cassette.certificates import FirstDifference
from replaykit.cassette.events import EnvEvent, Episode, GradeEvent
from replaykit.core.errors import ReplaykitError
from replaykit.core.records import JSON
from replaykit.envs.base import Environment
from replaykit.envs.extras import Extras, NetworkedEnvironment
from replaykit.envs.registry import make_env
from replaykit.envs.results import Grade
from replaykit.envs.section import recorded_env
from replaykit.envs.tasks import Task, load_task
from replaykit.episodes import network
from replaykit.episodes.certificate_lookup import DETERMINISTIC, ERROR, FORKED, env_kind
from replaykit.episodes.observation_scrub import scrub
from replaykit.episodes.rollout import EpisodeSpec, TaskView
from replaykit.episodes.workspaces import episode_lock


@dataclass
class _Difference:
    position: int
    step: int | None
    field: str
    action: str
    recorded: JSON
    reexecuted: JSON

    def to_dict(self, seed: int, cassette_id: str) -> FirstDifference:
        return {
            "position": self.position,
            "step": self.step,
            "field": self.field,
            "action": self.action,
            "recorded": self.recorded,
            "reexecuted": self.reexecuted,
            "seed": seed,
            "cassette_id": cassette_id,
        }

    def reason(self, seed: int) -> str:
        where = (
            f"step {self.step} (event {self.position})"
            if self.step is not None
            else f"the grade (event {self.position})"
        )
        rec, new = json.dumps(self.recorded)[:120], json.dumps(self.reexecuted)[:120]
        return f"seed {seed}: {self.field} differs at {where} `{self.action[:80]}`: recorded {rec}, re-executed {new}"


class StepPlan:
    """An episode's recorded actions in a fresh environment, as recorded: a multi-step task's
    steps staged before their first action and graded after their last (``step_actions``)."""

    def __init__(self, episode: Episode, task: Task, env: Environment) -> None:
        recorded = episode.meta.get("task")
        self.bounds = list(recorded.get("step_actions") or []) if recorded else []
        self.plan: list[tuple[str, int]] = [
            p for i, n in enumerate(self.bounds) for p in [("begin", i)] + [("act", i)] * n + [("grade", i)]
        ]
        self.task, self.env = task, env
        self.graded: list[tuple[Any, Grade]] = []

    def _advance(self, to_action: bool) -> None:
        """Run staged/grade points until the next recorded action (or to the end)."""
        stepped: Any = self.env  # environments that run multi-step tasks have begin_step (local, docker)
        while self.plan and not (to_action and self.plan[0][0] == "act"):
            what, i = self.plan.pop(0)
            if what == "begin":
                stepped.begin_step(self.task.steps[i])
            elif what == "grade":
                self.graded.append((self.task.steps[i], self.env.grade()))
        if to_action and self.plan:
            self.plan.pop(0)

    def before_action(self) -> None:
        if self.bounds:
            self._advance(to_action=True)

    def grade(self) -> Grade:
        """The episode's grade: the verifier's, or a multi-step task's steps combined."""
        if not self.bounds:
            return self.env.grade()
        from replaykit.envs.steps import combine

        self._advance(to_action=False)
        return combine(self.graded, self.task.reward_strategy, len(self.task.steps))


def _rerun(episode: Episode, task: Task, extras: Extras | None = None) -> _Difference | None:
    """Run the episode's recorded actions in a fresh environment; the first difference. One
    process at a time per episode key: the workspace path is the key's (``workspaces.py``)."""
    with episode_lock(episode.key):
        return _rerun_locked(episode, task, extras)


def recorded_spec(episode: Episode, task: Task, extras: Extras | None = None) -> EpisodeSpec:
    """What an environment of the episode's recorded kind and ``env`` section is built from,
    to act again without its harness or model (re-execution, regrade)."""
    env_cfg = recorded_env(dict(episode.meta.get("env") or {"kind": env_kind(episode.key)}))
    return EpisodeSpec(
        key=episode.key,
        task_path=str(task.path),
        task=TaskView.of(task),
        tree_dir="",
        entry="",
        params={},
        temperature=0.0,
        base_url="",
        api_key="",
        env=env_cfg,
        extras=dict(extras or {}),
    )


def _rerun_locked(episode: Episode, task: Task, extras: Extras | None = None) -> _Difference | None:
    env = make_env(recorded_spec(episode, task, extras))

    def served() -> None:  # the recording had nothing for a request: say which
        missed = env.network_misses() if isinstance(env, NetworkedEnvironment) else []
        if missed:
            raise ReplaykitError(network.unrecorded_line(missed))

    step = 0
    plan = StepPlan(episode, task, env)
    try:
        env.start()
        for position, event in enumerate(episode.events):
            if isinstance(event, EnvEvent):
                plan.before_action()
                obs = env.run(event.action)
                served()
                rec = event.observation
                for field in ("exit_code", "timed_out", "stdout", "stderr"):
                    a, b = getattr(rec, field), getattr(obs, field)
                    if isinstance(a, str):
                        a, b = scrub(a), scrub(b)
                    if a != b:
                        return _Difference(
                            position, step, field, event.action, getattr(rec, field), getattr(obs, field)
                        )
                step += 1
            elif isinstance(event, GradeEvent):
                grade = plan.grade()
                served()
                rec_g = {
                    "reward": event.grade.reward,
                    "passed": event.grade.passed,
                    "infra_failure": event.grade.infra_failure,
                }
                new_g = {"reward": grade.reward, "passed": grade.passed, "infra_failure": grade.infra_failure}
                if rec_g != new_g:
                    return _Difference(position, None, "grade", "tests/test.sh", rec_g, new_g)
    finally:
        env.close()
    return None


Check = tuple[str, str, FirstDifference | None]  # status, reason, first difference


def forked_reason(episode: Episode) -> str | None:
    """Why the episode's env kind says it can never be certified deterministic (docker: it
    ran on a live network, its observations depend on what was served that day), or None."""
    environment = episode.meta.get("environment")
    if not isinstance(environment, dict):
        return None
    hooks = network.extras_of(episode.key.extra, environment)
    return None if hooks is None else hooks.forked_reason(environment)


def check_task(episodes: list[Episode], task: Task, served: dict[str, Extras] | None = None) -> Check:
    """Re-execute every episode of one task: deterministic, forked (with the first
    difference, or the kind's reason it can never be deterministic) or error. ``served``:
    each episode's extras serving its recording (``episodes/network.py``). Writes nothing,
    so it can run on any worker."""
    status, reason = DETERMINISTIC, ""
    first: FirstDifference | None = None
    for episode in episodes:
        why = forked_reason(episode)
        if why is not None:
            reason = f"seed {episode.key.seed}: {why}"
            return FORKED, reason, {"field": "network", "seed": episode.key.seed, "cassette_id": episode.id}
    try:
        for episode in episodes:
            diff = _rerun(episode, task, (served or {}).get(episode.id))
            if diff is not None:
                status, reason, first = (
                    FORKED,
                    diff.reason(episode.key.seed),
                    diff.to_dict(episode.key.seed, episode.id),
                )
                break
    except ReplaykitError as exc:
        status, reason = ERROR, str(exc)
    return status, reason, first


@dataclass
class CertifyJob:
    """One task's episodes to re-execute (picklable; the task folder travels by content)."""

    episodes: list[Episode]
    task_path: str
    served: dict[str, Extras] | None = None  # each episode's extras serving its recording

    portable_paths: ClassVar[tuple[str, ...]] = ("task_path",)


def certify_job(job: CertifyJob) -> Check:
    return check_task(job.episodes, load_task(job.task_path), job.served)
