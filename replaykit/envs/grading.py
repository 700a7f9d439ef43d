"""Grading semantics shared by every environment kind: the verifier's env vars
(``[verifier.env]`` plus a step's), the grade read from a verifier run and the folder
its reward file went to, and the oracle's pair of grades (untouched, solved) behind
``replaykit tasks check``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replaykit.envs import task_env
from replaykit.envs.base import Grade, Observation
from replaykit.envs.rewards import read_reward
from replaykit.envs.steps import Step, run_steps
from replaykit.envs.tasks import Task

_DETAIL_CHARS = 1000
_HEAD_CHARS = 300


def head_and_tail(text: str, limit: int = _DETAIL_CHARS, head: int = _HEAD_CHARS) -> str:
    """``text`` whole when short, else its first ``head`` and last characters joined by
    `` … ``, ``limit`` in all (what a command did first, and where it was stuck)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return f"{text[:head].rstrip()} … {text[-max(1, limit - head - 3) :].lstrip()}"


def verifier_vars(task: Task, step: Step | None) -> task_env.ResolvedEnv:
    """``[verifier.env]`` of the task, plus the current step's ``[steps.verifier.env]``."""
    env = task_env.task_env(task.path, task.config, "verifier")
    if step is not None and step.verifier_env:
        env = env.merged(
            task_env.resolve(step.verifier_env, f"{task.path / 'task.toml'} [steps.verifier.env]")
        )
    return env


def verifier_grade(obs: Observation, reward_dir: Path, timeout_sec: float) -> Grade:
    """The grade from a verifier run and the folder its reward file was written to
    (the same semantics for every environment)."""
    output = (obs.stdout + obs.stderr).strip()
    tail = output[-_DETAIL_CHARS:]
    if obs.timed_out:  # what it did first and where it was stuck: both ends of its output
        said = head_and_tail(output)
        return Grade(
            0.0,
            False,
            infra_failure=True,
            detail=f"verifier timed out after {timeout_sec:g} s" + (f"; output: {said}" if said else ""),
        )
    reward, source, problem = read_reward(reward_dir)
    if reward is None:
        return Grade(
            0.0,
            False,
            infra_failure=True,
            detail=f"{problem} (verifier exit {obs.exit_code}); {tail}".strip(),
        )
    return Grade(
        reward,
        reward >= 1.0,
        detail=f"reward {reward:g} from {source} (verifier exit {obs.exit_code}); {tail}".strip(),
    )


def oracle_grades(env: Any) -> tuple[Grade, Grade]:
    """Grade an untouched environment, then a fresh one where solution/solve.sh ran; close it."""
    steps = env.task.steps
    try:
        env.start()
        untouched = (
            run_steps(env, steps, env.task.reward_strategy, lambda step: None) if steps else env.grade()
        )
        env.start()
        if steps:
            solved = run_steps(env, steps, env.task.reward_strategy, lambda step: env.run_solution())
        else:
            env.run_solution()
            solved = env.grade()
    finally:
        env.close()
    return untouched, solved
