"""One verifier for every environment kind, written once over environment primitives (as
Harbor's ``Verifier`` is over its environments' ``exec``/``upload_dir``/``download_file``).

A kind's environment subclasses :class:`Sandbox` and implements its primitives (run a
process, copy a folder in, read a file back, the paths its verifier uses, its secrets,
whether it broke); it gets ``grade`` and ``run_solution``, and with them the oracle check
(``oracle_grades``; ``EnvKind.check`` runs it on the kind's factory when the kind has no
oracle of its own):

- ``grade``: clear ``tests/`` and ``logs/verifier/`` (a stale reward is never read), copy
  the task's tests (a step's on top of the task's shared ones), run ``bash tests/test.sh``
  with ``[verifier.env]`` and the verifier's timeout (what the actions and the solution left
  running in the background runs until then, as in Harbor; ``end_processes`` ends it after), its stdout and stderr written to
  ``logs/verifier/test-stdout.txt`` / ``test-stderr.txt`` by the process itself and read
  back whole once it ended (never the tail of a stream cut short), then the reward it
  wrote (``rewards.py``). A timeout, no reward or a broken environment is an
  infrastructure failure, never a task failure.
- ``run_solution``: copy ``solution/`` (or the step's) in, run ``bash solve.sh`` with
  ``[solution.env]`` and ``SOLUTION_DIR``, its output written to ``logs/agent/oracle-stdout.txt``
  and ``oracle-stderr.txt`` (Harbor: ``oracle.txt``) and read back.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from replaykit.core.errors import TaskError
from replaykit.core.meta import VerifierMeta
from replaykit.envs import task_env
from replaykit.envs.output import CappedOutput
from replaykit.envs.results import Grade, Observation, VerifierOutput
from replaykit.envs.rewards import read_reward, reward_values
from replaykit.envs.steps import Step, run_steps
from replaykit.envs.tasks import Task

_DETAIL_CHARS = 1000
_HEAD_CHARS = 300
_PREP_TIMEOUT_SEC = 60
REWARD_FILES = ("reward.txt", "reward.json")
OUTPUT_FILES = ("test-stdout.txt", "test-stderr.txt")  # in logs/verifier/, as Harbor names its one
SOLUTION_FILES = ("oracle-stdout.txt", "oracle-stderr.txt")  # in logs/agent/ (Harbor: oracle.txt)


@dataclass(frozen=True)
class VerifierPaths:
    """Where the verifier's folders are, as the environment's processes name them."""

    tests: str  # TESTS_DIR
    logs: str  # LOGS_DIR (the reward goes to logs/verifier/)
    solution: str  # SOLUTION_DIR (the oracle only)


class Sandbox(Protocol):
    """The primitives the verifier runs on. An environment class that subclasses this
    protocol and implements them gets ``grade`` and ``run_solution`` (the verifier's)."""

    task: Task
    step: Step | None  # the step being graded (multi-step tasks), else None
    max_output_bytes: int

    @property
    def verifier_paths(self) -> VerifierPaths: ...

    @property
    def secrets(self) -> Mapping[str, str]:
        """Host values scrubbed from every output (``<secret:NAME>``)."""
        ...

    def exec(
        self, argv: list[str], timeout_sec: float, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> Observation:
        """Run ``argv`` (in the workdir unless ``cwd``) with ``env`` on top of the
        environment's own variables; outputs capped and scrubbed; exit 124 on timeout."""
        ...

    def upload_dir(self, source: Path, target: str) -> None:
        """Copy the folder ``source`` into ``target`` (merged: files of ``source`` win);
        ``EnvError`` when it cannot."""
        ...

    def download_file(self, path: str, limit: int) -> bytes | None:
        """At most ``limit`` bytes of the regular file ``path`` (None when there is none)."""
        ...

    def add_secrets(self, secrets: Mapping[str, str]) -> None:
        """Host values to scrub from this and every later output too."""
        ...

    def broken(self) -> str | None:
        """Why the environment cannot run anything any more (an infrastructure failure), or None."""
        ...

    def end_processes(self) -> None:
        """Kill what the actions and the solution left running (the image's services aside):
        called once the verifier has run, as Harbor keeps them until then. A kind whose actions
        leave nothing running keeps this default."""
        return None

    # -- what a kind gets by subclassing this protocol -------------------------------
    def grade(self) -> Grade:
        """Copy tests/ in fresh, clear logs/verifier, run ``bash tests/test.sh``, read the reward it wrote."""
        return Verifier(self).grade()

    def run_solution(self) -> Observation:
        """Oracle: copy solution/ (or the current step's) in and run ``bash solve.sh``."""
        return Verifier(self).run_solution()


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
    """The grade from a verifier run and the folder its reward file was written to."""
    output = (obs.stdout + obs.stderr).strip()
    tail = output[-_DETAIL_CHARS:]
    if obs.timed_out:  # what it did first and where it was stuck: both ends of its output
        said = head_and_tail(output)
        return Grade(
            0.0,
            False,
            infra_failure=True,
            detail=f"verifier timed out after {timeout_sec:g} s" + (f"; output: {said}" if said else ""),
            timed_out=True,
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


def _infra(reason: str, what: str = "infrastructure failure") -> Grade:
    return Grade(0.0, False, infra_failure=True, detail=f"{what}: {reason}")


class Verifier:
    """Grades (and runs the oracle of) one environment through its primitives."""

    def __init__(self, env: Sandbox) -> None:
        self.env = env

    def _fresh(self, *folders: str) -> str | None:
        """``folders`` removed and made again, empty; why not, when it failed."""
        quoted = " ".join(shlex.quote(f) for f in folders)
        prep = self.env.exec(
            ["bash", "-c", f"rm -rf {quoted} && mkdir -p {quoted}"], _PREP_TIMEOUT_SEC, cwd="/"
        )
        if prep.exit_code == 0:
            return None
        said = (prep.stderr or prep.stdout).strip().splitlines()
        return said[-1][:200] if said else f"exit {prep.exit_code}"

    def grade(self) -> Grade:
        env, task, step = self.env, self.env.task, self.env.step
        paths = env.verifier_paths
        logs = f"{paths.logs}/verifier"
        if (why := env.broken()) is not None:
            return _infra(why)
        problem = self._fresh(paths.tests, logs)
        if (why := env.broken()) is not None:
            return _infra(why)
        if problem is not None:
            return _infra(f"cannot prepare the verifier: {problem}")
        sources, timeout = (
            (step.tests_sources, step.verifier_timeout_sec) if step else ((task.tests_dir,), None)
        )
        timeout = timeout or task.verifier_timeout_sec
        for tests in sources:  # a step's tests/ on top of the task's shared tests/ (as Harbor)
            env.upload_dir(tests, paths.tests)
        variables = verifier_vars(task, step)
        env.add_secrets(variables.secrets)
        out, err = (shlex.quote(f"{logs}/{name}") for name in OUTPUT_FILES)
        script = f"bash {shlex.quote(paths.tests + '/test.sh')} >{out} 2>{err}"
        ran = env.exec(["bash", "-c", script], timeout, variables.values)
        env.end_processes()  # kept for the verifier (a server it queries), not beyond it
        obs = self._captured(ran, logs)
        with tempfile.TemporaryDirectory(prefix="replaykit-reward-") as tmp:
            for name in REWARD_FILES:
                data = env.download_file(f"{logs}/{name}", 1 << 20)
                if data is not None:
                    (Path(tmp) / name).write_bytes(data)
            if (why := env.broken()) is not None:
                return _infra(why, "infrastructure failure while verifying")
            grade = verifier_grade(obs, Path(tmp), timeout)
            return replace(grade, output=VerifierOutput(obs.stdout, obs.stderr, reward_values(Path(tmp))))

    def _captured(self, run: Observation, logs: str, files: tuple[str, str] = OUTPUT_FILES) -> Observation:
        """The verifier's (or the solution's) observation with its output as the process wrote
        it to its files (whole, capped as every output is); what reached the stream beside
        them follows."""
        texts = []
        for name, stream, extra in zip(files, ("stdout", "stderr"), (run.stdout, run.stderr), strict=True):
            kept = CappedOutput(self.env.max_output_bytes)
            kept.add(self.env.download_file(f"{logs}/{name}", self.env.max_output_bytes + 1))
            texts.append(task_env.scrub(kept.text(stream), self.env.secrets) + extra)
        return Observation(texts[0], texts[1], run.exit_code, run.timed_out)

    def run_solution(self) -> Observation:
        env, task, step = self.env, self.env.task, self.env.step
        variables = task_env.task_env(task.path, task.config, "solution")
        source, timeout = task.solution_dir, task.agent_timeout_sec
        if step is not None:
            if step.solution_dir is None:
                raise TaskError(
                    f"{step.dir / 'solution' / 'solve.sh'}: missing; step {step.name!r} has no oracle"
                )
            source, timeout = step.solution_dir, step.agent_timeout_sec or timeout
            variables = variables.merged(
                task_env.resolve(step.solution_env, f"{task.path / 'task.toml'} [steps.solution.env]")
            )
        elif not (source / "solve.sh").is_file():
            raise TaskError(f"{task.solution_dir / 'solve.sh'}: missing; the task has no oracle")
        target, logs = env.verifier_paths.solution, f"{env.verifier_paths.logs}/agent"
        self._fresh(target, logs)
        env.upload_dir(source, target)
        env.add_secrets(variables.secrets)
        # its output goes to files, as Harbor's oracle writes logs/agent/oracle.txt: what it
        # leaves running in the background (a server) writes on there, never to a closed stream
        out, err = (shlex.quote(f"{logs}/{name}") for name in SOLUTION_FILES)
        script = f"bash {shlex.quote(target + '/solve.sh')} >{out} 2>{err}"
        ran = env.exec(["bash", "-c", script], timeout, {**variables.values, "SOLUTION_DIR": target})
        return self._captured(ran, logs, SOLUTION_FILES)


def oracle_grades(env: Any) -> tuple[Grade, Grade]:
    """Grade an untouched environment, then a fresh one where solution/solve.sh ran; close it.
    A solution stopped by its (agent) timeout is still graded, as Harbor grades it, and its
    grade's detail starts with "solution timed out after N s"."""
    steps = env.task.steps
    stopped: list[str] = []

    def solve(step: Step | None) -> None:
        if env.run_solution().timed_out:
            limit = (step.agent_timeout_sec if step else None) or env.task.agent_timeout_sec
            stopped.append(
                f"solution timed out after {limit:g} s" + (f" (step {step.name!r})" if step else "")
            )

    try:
        env.start()
        untouched = (
            run_steps(env, steps, env.task.reward_strategy, lambda step: None) if steps else env.grade()
        )
        env.start()
        if steps:
            solved = run_steps(env, steps, env.task.reward_strategy, solve)
        else:
            solve(None)
            solved = env.grade()
    finally:
        env.close()
    if stopped:
        solved = replace(solved, detail="; ".join([*stopped, solved.detail]).rstrip("; "))
    return untouched, solved


def verifier_meta(
    grade: Grade, steps: list[tuple[str, Grade]], scrub: Callable[[str], str]
) -> VerifierMeta | None:
    """What the verifier wrote beside the grade, scrubbed (each step's for a multi-step task); None
    when it never ran (an infra failure before it)."""
    if not steps:
        out = grade.output
        if out is None:
            return None
        return {"stdout": scrub(out.stdout), "stderr": scrub(out.stderr), "rewards": dict(out.rewards)}
    return {
        "stdout": "",
        "stderr": "",
        "rewards": {} if grade.infra_failure else {"reward": grade.reward},
        "steps": [
            {
                "name": name,
                "reward": g.reward,
                "passed": g.passed,
                "infra_failure": g.infra_failure,
                "detail": scrub(g.detail),
                "rewards": dict(g.output.rewards) if g.output else {},
                "stdout": scrub(g.output.stdout) if g.output else "",
                "stderr": scrub(g.output.stderr) if g.output else "",
            }
            for name, g in steps
        ],
    }
