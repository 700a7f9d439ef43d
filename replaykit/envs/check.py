"""The oracle check of task folders: the untouched environment scores 0, the solution 1.

``check_tasks(["tasks/*"], root, kind="docker")`` (or ``env=`` a validated section) finds the task folders, then loads
and grades each on its own, twice in fresh environments: untouched, and after
``solution/solve.sh``. A task passes when the first grade is below 1 (no
infrastructure failure) and the second passes. An untouched score strictly between
0 and 1 (partial credit by design, e.g. 0.33) passes with a ``warning`` that gives the
score. A malformed or unsupported task is that task's one-line ``problem``; the batch
goes on with the others (a Terminal-Bench 1 folder loads natively, ``tb1.py``).

Every row also says which Harbor features the task uses and which replaykit ignored
(``features.feature_report``), and carries ``warnings``: each unknown task.toml key
(by name), each image alias applied and each version pin the python base image
replaces (never silent; the same lines are stored with a run's episodes).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from replaykit.core.errors import EnvError, TaskError
from replaykit.core.progress import Progress
from replaykit.envs import features
from replaykit.envs.base import EnvKind, EnvSection, KeyPairs, S
from replaykit.envs.extras import Extras
from replaykit.envs.registry import get_env_kind
from replaykit.envs.results import Grade
from replaykit.envs.section import EnvConfig
from replaykit.envs.tasks import Task, load_task, panel_folders
from replaykit.envs.verifier import head_and_tail, oracle_grades


class TaskCheckRow(TypedDict):
    """One task of ``tasks check``: the two grades, and why it fails (``problem``) or may mislead."""

    task_id: str
    path: str
    digest: str | None  # None: the task did not load
    ok: bool
    untouched: float | None  # the untouched environment's reward (None: not graded)
    solved: float | None  # the solution's reward
    problem: str
    warning: str  # the warnings, joined
    warnings: list[str]
    notes: list[str]  # what replaykit substitutes (an image alias, uvx pins): information, not warnings
    features: list[str]  # Harbor features the task uses
    ignored: list[str]  # ... and those replaykit ignores


class TaskCheckReport(TypedDict):
    """``tasks check --json``."""

    env: str
    tasks: list[TaskCheckRow]
    passed: int
    total: int
    warnings: int  # tasks with a warning
    notes: dict[str, list[str]]  # each substitution note, once, with the tasks it applies to
    ok: bool


def tail(text: str, limit: int = 400) -> str:
    """A grade's detail in about ``limit`` characters: its lead (what happened, up to the
    first ``;``: "verifier timed out after 5 s"), then both ends of the rest (how the output
    began, and where the cause of a failure usually is: its end)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    first = text.splitlines()[0]
    lead, rest = text.split(";", 1) if ";" in first[: limit // 2] else ("", text)
    budget = limit - len(lead) - 2
    body = head_and_tail(rest, budget, head=budget // 3)
    return f"{lead}; {body}" if lead else body


@dataclass(frozen=True)
class _OracleKey:
    id: str
    extra: KeyPairs


@dataclass(frozen=True)
class _OracleRequest:
    """What a kind's factory gets for an oracle check: a key of its own, no extras."""

    key: _OracleKey
    task_path: str
    env: EnvSection
    extras: Extras = field(default_factory=dict)


def oracle_check(kind: EnvKind[S], task: Task, env: EnvSection) -> tuple[Grade, Grade]:
    """The kind's oracle, else the verifier's (``oracle_grades``) on an environment its
    factory builds under a key of its own: untouched, then solved."""
    if kind.oracle is not None:
        return kind.oracle(task, kind.section(env))
    key = _OracleKey(f"oracle-{task.id}-{uuid.uuid4().hex[:12]}", kind.key(env, task))
    sandbox = kind.build(_OracleRequest(key, str(task.path), env))
    if not callable(getattr(sandbox, "run_solution", None)):
        raise EnvError(
            f"environment kind {kind.kind!r} has no oracle check: give its EnvKind an oracle, "
            "or implement the verifier's primitives (replaykit.envs.verifier.Sandbox)"
        )
    return oracle_grades(sandbox)


def check_tasks(
    patterns: list[str],
    root: Path,
    kind: str = "docker",
    progress: Progress | None = None,
    env: EnvSection | None = None,
) -> TaskCheckReport:
    """Run the oracle check on every task the paths/globs name; one row per task. ``env``:
    the ``env`` section to check under (its kind's settings, Harbor's limits); default:
    ``kind``'s defaults."""
    env_kind = get_env_kind(env.kind if env is not None else kind)  # an unknown kind: its EnvError line
    env = env if env is not None else EnvConfig(kind=kind)
    kind = env.kind
    folders = panel_folders(patterns, root)
    if progress:
        progress("plan", {"total": len(folders)})
    rows: list[TaskCheckRow] = []
    for folder in folders:
        try:
            task = load_task(folder)
        except TaskError as exc:
            rows.append(_unloadable(folder, exc))
            if progress:
                progress("task", {"task_id": folder.name})
            continue
        rows.append(_check_task(env_kind, task, env))
        if progress:
            progress("task", {"task_id": task.id})
    return {
        "env": kind,
        "tasks": rows,
        "passed": sum(1 for r in rows if r["ok"]),
        "total": len(rows),
        "warnings": sum(1 for r in rows if r.get("warning")),
        "notes": _grouped_notes(rows),
        "ok": all(r["ok"] for r in rows),
    }


def _unloadable(folder: Path, exc: TaskError) -> TaskCheckRow:
    """The row of a task folder that does not load: why."""
    return {
        "task_id": folder.name,
        "path": str(folder),
        "digest": None,
        "ok": False,
        "untouched": None,
        "solved": None,
        "problem": str(exc),
        "warning": "",
        "warnings": [],
        "notes": [],
        "features": [],
        "ignored": [],
    }


def _check_task(env_kind: EnvKind, task: Task, env: EnvSection) -> TaskCheckRow:
    """One task's row: its features, the kind's notes, and the oracle check's two grades."""
    report = features.feature_report(task.config, task.path)
    notes = [f"unknown task.toml key {key!r} (Harbor ignores it too; a typo?)" for key in report["unknown"]]
    # what the kind applies that the task did not say (an image alias): notes, said once per image
    substituted = env_kind.warnings(task, env)
    row = TaskCheckRow(
        task_id=task.id,
        path=str(task.path),
        digest=task.digest[:12],
        ok=False,
        untouched=None,
        solved=None,
        problem="",
        warning="",
        warnings=[],
        notes=substituted,
        features=report["used"],
        ignored=report["ignored"],
    )
    if not task.has_solution:
        row["problem"] = f"{task.solution_dir / 'solve.sh'}: missing; no oracle to check"
    else:
        try:
            untouched, solved = oracle_check(env_kind, task, env)
        except (EnvError, TaskError) as exc:
            row["problem"] = str(exc)
        else:
            problems = _oracle_problems(untouched, solved, notes)
            row["ok"], row["untouched"], row["solved"] = not problems, untouched.reward, solved.reward
            row["problem"] = "; ".join(problems)
    row["warnings"], row["warning"] = notes, "; ".join(notes)
    return row


def _oracle_problems(untouched: Grade, solved: Grade, notes: list[str]) -> list[str]:
    """What the oracle check found wrong: an untouched environment that scores (partial credit
    is a note, added to ``notes``), a solution that does not pass."""
    problems = []
    if untouched.infra_failure or untouched.reward >= 1 or untouched.reward < 0:
        problems.append(
            f"untouched environment scored {untouched.reward:g}"
            + (" (infra failure)" if untouched.infra_failure else "")
            + f": {tail(untouched.detail)}"
        )
    elif untouched.reward > 0:
        notes.append(f"untouched environment scores {untouched.reward:g} (partial credit without any work)")
    if not solved.passed:
        problems.append(
            f"solution scored {solved.reward:g}"
            + (" (infra failure)" if solved.infra_failure else "")
            + f": {tail(solved.detail)}"
        )
    return problems


def _grouped_notes(rows: list[TaskCheckRow]) -> dict[str, list[str]]:
    """Each substitution note once, with the tasks it applies to (14 tasks on one aliased base
    image are one note, not 14 warnings)."""
    grouped: dict[str, list[str]] = {}
    for row in rows:
        for note in row["notes"]:
            grouped.setdefault(note, []).append(row["task_id"])
    return grouped
