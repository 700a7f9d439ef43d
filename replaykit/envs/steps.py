"""Harbor's multi-step tasks (``[[steps]]`` in task.toml).

Each ``[[steps]]`` table has a ``name``; its files live in ``steps/<name>/``:
``instruction.md`` (required), ``tests/`` (as in Harbor, the task's shared ``tests/``
is copied to ``/tests`` first and the step's on top, so a step's ``test.sh`` can
source a shared helper; the step's ``test.sh`` runs, else the shared one), ``solution/solve.sh`` (the oracle of that step), and
``workdir/`` (files copied into the workdir before the step, ``setup.sh`` among
them is run there first). Steps run in order in **one** environment: before each
step its workdir files are staged, the agent works on the step's instruction, the
step's verifier grades it. ``min_reward = x`` on a step stops the remaining steps
when its reward is below ``x``. The episode's reward follows task.toml's
``multi_step_reward_strategy``: ``"mean"`` (Harbor's default: the mean over the
steps that were graded) or ``"final"`` (the last graded step's). Any step's
infrastructure failure makes the episode's grade an infrastructure failure.

Refused with one line (not supported here): a per-step ``min_reward`` table (per-key
thresholds), a step ``[steps.verifier] environment_mode = "separate"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replaykit.core.errors import TaskError
from replaykit.envs.results import Grade

STRATEGIES = ("mean", "final")
_STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Step:
    """One step of a multi-step task."""

    name: str
    instruction: str
    dir: Path
    tests_dir: Path  # the folder whose test.sh runs (the step's, else the task's)
    solution_dir: Path | None
    workdir_dir: Path | None
    min_reward: float | None
    agent_timeout_sec: float | None
    verifier_timeout_sec: float | None
    verifier_env: dict[str, str]
    solution_env: dict[str, str]
    test_sources: tuple[Path, ...] = ()  # copied to /tests in this order (shared, then the step's)

    @property
    def tests_sources(self) -> tuple[Path, ...]:
        """The folders copied into the tests folder, in order (later ones win)."""
        return self.test_sources or (self.tests_dir,)


def _timeout(table: Any, where: str, field: str) -> float | None:
    if not isinstance(table, dict) or "timeout_sec" not in table:
        return None
    value = table["timeout_sec"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TaskError(f"{where}: field '{field}.timeout_sec' must be a number > 0, got {value!r}")
    return float(value)


def load_steps(folder: Path, config: Mapping[str, Any]) -> tuple[Step, ...]:
    """The validated steps of a task folder; () for a single-step task."""
    raw = config.get("steps")
    if raw is None:
        return ()
    where = str(folder / "task.toml")
    if not isinstance(raw, list) or not raw or not all(isinstance(s, dict) for s in raw):
        raise TaskError(f"{where}: field 'steps' must be one or more [[steps]] tables")
    strategy = config.get("multi_step_reward_strategy", "mean")
    if strategy not in STRATEGIES:
        raise TaskError(
            f"{where}: field 'multi_step_reward_strategy' is {strategy!r}; expected one of: {', '.join(STRATEGIES)}"
        )
    steps: list[Step] = []
    seen: set[str] = set()
    for i, table in enumerate(raw):
        step = _step(folder, where, f"steps[{i}]", table)
        if step.name in seen:
            raise TaskError(
                f"{where}: field 'steps[{i}].name' repeats step {step.name!r}; step names must be unique"
            )
        seen.add(step.name)
        steps.append(step)
    return tuple(steps)


def _step(folder: Path, where: str, label: str, table: Mapping[str, Any]) -> Step:
    """One ``[[steps]]`` table, validated, with its folder ``steps/NAME``."""
    name = table.get("name")
    if not isinstance(name, str) or not _STEP_NAME.match(name):
        raise TaskError(
            f"{where}: field '{label}.name' must be a folder name (letters, digits, . _ -), got {name!r}"
        )
    step_dir = folder / "steps" / name
    instruction = _instruction(step_dir, name)
    tests = step_dir / "tests" if (step_dir / "tests" / "test.sh").is_file() else folder / "tests"
    if not (tests / "test.sh").is_file():
        raise TaskError(
            f"{step_dir / 'tests' / 'test.sh'}: missing (and no shared tests/test.sh); step {name!r} has no verifier"
        )
    min_reward = _min_reward(table.get("min_reward"), where, label)
    verifier = table.get("verifier") or {}
    if isinstance(verifier, dict) and verifier.get("environment_mode") == "separate":
        raise TaskError(
            f"{where}: field '{label}.verifier.environment_mode' = \"separate\" is not supported (replaykit verifies in the agent's environment)"
        )
    env_tables = {
        s: (table.get(s) or {}).get("env", {}) if isinstance(table.get(s), dict) else {}
        for s in ("verifier", "solution")
    }
    for section, env in env_tables.items():
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise TaskError(f"{where}: field '{label}.{section}.env' must be a table of strings")
    solution = step_dir / "solution"
    workdir = step_dir / "workdir"
    return Step(
        name=name,
        instruction=instruction,
        dir=step_dir,
        tests_dir=tests,
        solution_dir=solution if (solution / "solve.sh").is_file() else None,
        workdir_dir=workdir if workdir.is_dir() else None,
        min_reward=min_reward,
        agent_timeout_sec=_timeout(table.get("agent"), where, f"{label}.agent"),
        verifier_timeout_sec=_timeout(verifier, where, f"{label}.verifier"),
        verifier_env=dict(env_tables["verifier"]),
        solution_env=dict(env_tables["solution"]),
        test_sources=tuple(d for d in (folder / "tests", step_dir / "tests") if d.is_dir()),
    )


def _instruction(step_dir: Path, name: str) -> str:
    """A step's ``instruction.md``: present and not empty."""
    path = step_dir / "instruction.md"
    if not path.is_file():
        raise TaskError(f"{path}: missing; step {name!r} needs its instruction there")
    instruction = path.read_text(encoding="utf-8")
    if not instruction.strip():
        raise TaskError(f"{path}: empty; write step {name!r}'s instruction there")
    return instruction


def _min_reward(value: object, where: str, label: str) -> float | None:
    """A step's ``min_reward``: one number (per-key tables are Harbor's, not replaykit's)."""
    if isinstance(value, dict):
        raise TaskError(
            f"{where}: field '{label}.min_reward' is a table of per-key thresholds, which replaykit does not support; use one number"
        )
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise TaskError(f"{where}: field '{label}.min_reward' must be a number, got {value!r}")
    return None if value is None else float(value)


def combine(graded: list[tuple[Step, Grade]], strategy: str, total: int) -> Grade:
    """The episode's grade from the steps' grades (see the module docstring)."""
    if not graded:
        return Grade(0.0, False, infra_failure=True, detail="no step was graded")
    lines = [
        f"step {s.name}: reward {g.reward:g}" + (" (infra failure)" if g.infra_failure else "")
        for s, g in graded
    ]
    if len(graded) < total:
        last_step, last = graded[-1]
        why = (
            "infra failure"
            if last.infra_failure
            else f"below its min_reward {last_step.min_reward:g}"
            if last_step.min_reward is not None
            else "stopped"
        )
        lines.append(f"stopped after step {last_step.name}: {why}")
    infra = any(g.infra_failure for _, g in graded)
    if strategy == "final":
        reward = graded[-1][1].reward
    else:
        reward = sum(g.reward for _, g in graded) / len(graded)
    head = f"{strategy} over {len(graded)} of {total} steps: reward {reward:g}"
    details = "; ".join(f"[{s.name}] {g.detail}" for s, g in graded)
    return Grade(
        0.0 if infra else reward,
        (not infra) and reward >= 1.0,
        infra_failure=infra,
        detail=f"{head} ({', '.join(lines)}); {details}"[:2000],
    )


def run_steps(env: Any, steps: tuple[Step, ...], strategy: str, act: Callable[[Step], None]) -> Grade:
    """Run every step in ``env`` (already started): stage it, ``act`` (the agent or the
    oracle), grade it; stop early below a step's ``min_reward``; combine the grades."""
    graded: list[tuple[Step, Grade]] = []
    for step in steps:
        env.begin_step(step)
        act(step)
        grade = env.grade()
        graded.append((step, grade))
        if grade.infra_failure or (step.min_reward is not None and grade.reward < step.min_reward):
            break
    return combine(graded, strategy, len(steps))
