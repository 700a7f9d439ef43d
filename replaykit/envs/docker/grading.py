"""The Docker kind's oracle and verifier, inside an episode's container.

``run_solution`` copies ``solution/`` (or the current step's) to ``/solution`` and runs
``bash /solution/solve.sh`` in the workdir with ``[solution.env]``; ``grade`` copies
``tests/`` (a step's on top of the task's shared one) to ``/tests`` fresh, clears
``/logs/verifier``, runs ``bash /tests/test.sh`` with ``[verifier.env]`` and reads the
reward it wrote back out of the container (``grading.verifier_grade``: the same semantics
as ``LocalEnv.grade``). A dead container or a verifier that cannot be prepared is an
infrastructure failure, never a task failure. ``DockerEnv`` (``docker.py``) calls these.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from replaykit.core.errors import EnvError, TaskError
from replaykit.envs import task_env
from replaykit.envs.base import Grade, Observation
from replaykit.envs.docker import snapshot
from replaykit.envs.docker.episode_container import EpisodeContainer
from replaykit.envs.grading import verifier_grade, verifier_vars
from replaykit.envs.steps import Step
from replaykit.envs.tasks import Task

TESTS_DIR = "/tests"
LOGS_DIR = "/logs"
SOLUTION_DIR = "/solution"


class Exec(Protocol):
    """``DockerEnv._exec``: run ``argv`` in the episode's container (the workdir unless ``cwd``)."""

    def __call__(
        self,
        argv: list[str],
        timeout_sec: float,
        extra_env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> Observation: ...


def _infra_failure(reason: str, what: str = "infrastructure failure") -> Grade:
    return Grade(0.0, False, infra_failure=True, detail=f"{what}: {reason}")


def run_solution(
    task: Task,
    step: Step | None,
    started: Callable[[], EpisodeContainer],
    run: Exec,
    secrets: dict[str, str],
) -> Observation:
    """Oracle: copy solution/ (or ``step``'s) to /solution and run ``bash /solution/solve.sh``
    with ``[solution.env]`` (its host values join ``secrets``, scrubbed from outputs)."""
    env = task_env.task_env(task.path, task.config, "solution")
    source, timeout = task.solution_dir, task.agent_timeout_sec
    if step is not None:
        if step.solution_dir is None:
            raise TaskError(
                f"{step.dir / 'solution' / 'solve.sh'}: missing; step {step.name!r} has no oracle"
            )
        source, timeout = step.solution_dir, step.agent_timeout_sec or timeout
        env = env.merged(
            task_env.resolve(step.solution_env, f"{task.path / 'task.toml'} [steps.solution.env]")
        )
    elif not (source / "solve.sh").is_file():
        raise TaskError(f"{task.solution_dir / 'solve.sh'}: missing; the task has no oracle")
    run(["bash", "-c", f"rm -rf {SOLUTION_DIR}"], 60, cwd="/")
    started().put(source, SOLUTION_DIR)
    secrets.update(env.secrets)
    return run(["bash", f"{SOLUTION_DIR}/solve.sh"], timeout, {**env.values, "SOLUTION_DIR": SOLUTION_DIR})


def grade(task: Task, step: Step | None, box: EpisodeContainer, run: Exec, secrets: dict[str, str]) -> Grade:
    """Copy tests/ to /tests fresh, clear /logs/verifier, run ``bash /tests/test.sh``,
    read the reward it wrote (same semantics as ``LocalEnv.grade``)."""
    if box.dead is not None:
        return _infra_failure(box.dead)
    prep = run(
        ["bash", "-c", f"rm -rf {TESTS_DIR} {LOGS_DIR}/verifier && mkdir -p {LOGS_DIR}/verifier"],
        60,
        cwd="/",
    )
    if box.dead is not None:
        return _infra_failure(box.dead)
    if prep.exit_code != 0:
        said = (prep.stderr or prep.stdout).strip().splitlines()
        why = said[-1][:200] if said else f"exit {prep.exit_code}"
        return _infra_failure(f"cannot prepare the verifier: {why}")
    verifier_env = verifier_vars(task, step)
    sources, timeout = (step.tests_sources, step.verifier_timeout_sec) if step else ((task.tests_dir,), None)
    timeout = timeout or task.verifier_timeout_sec
    try:
        for tests in sources:  # a step's tests/ on top of the task's shared tests/ (as Harbor)
            box.put(tests, TESTS_DIR)
    except OSError as exc:
        raise EnvError(f"cannot copy the tests of task {task.id!r}: {exc}") from None
    secrets.update(verifier_env.secrets)
    obs = run(["bash", f"{TESTS_DIR}/test.sh"], timeout, verifier_env.values)
    with tempfile.TemporaryDirectory(prefix="replaykit-reward-") as tmp:
        for name in ("reward.txt", "reward.json"):
            data = snapshot.read_file(box.container, f"{LOGS_DIR}/verifier/{name}")
            if data is not None:
                (Path(tmp) / name).write_bytes(data)
        if box.dead is not None:
            return _infra_failure(box.dead, "infrastructure failure while verifying")
        return verifier_grade(obs, Path(tmp), timeout)
