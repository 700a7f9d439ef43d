"""Simulated task models: they "know" each task's solution and err at a set rate.

A task model reads the whole conversation (the request's ``messages``), works out
which task it is on and how far it got, and proposes the next solution step as a
``bash`` tool call, sometimes corrupted. Everything is a pure function of
(model name, request body, seed) and the task folders; see ``README.md`` for the
conventions a harness must follow (exit codes and retry nudges).
"""

from __future__ import annotations

import random
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from replaykit.core.determinism import canonical_json, derive_seed, sha256_hex
from replaykit.models.reference import terminus
from replaykit.models.reference.mistakes import corrupt_command
from replaykit.models.reference.protocol import (
    AssistantTurn,
    ChatRequest,
    ToolCall,
    message_text,
    schema_properties,
)
from replaykit.models.reference.scripts import script_steps, solution_env


@dataclass(frozen=True)
class Skill:
    """How a simulated model errs.

    ``mistake_rate``: chance a first attempt at a step is corrupted.
    ``recover_rate``: chance a retried attempt is correct.
    ``max_attempts``: attempts at one step before the model moves on regardless.
    """

    mistake_rate: float
    recover_rate: float
    max_attempts: int = 4


#: The skill table: every simulated task model, by the name a request uses.
SKILLS: dict[str, Skill] = {
    "reference-oracle": Skill(mistake_rate=0.0, recover_rate=1.0),
    "reference-strong": Skill(mistake_rate=0.12, recover_rate=0.85),
    "reference-weak": Skill(mistake_rate=0.40, recover_rate=0.60),
}

#: ``exit_code: 1``, ``exit code=0``, ``Exit code 127`` ...; the first match in a tool result wins.
EXIT_CODE_RE = re.compile(r"exit[_ ]code[:=]?\s*(-?\d+)", re.IGNORECASE)
#: The retry nudge: the word "retry", any case.
RETRY_RE = re.compile(r"\bretry\b", re.IGNORECASE)
#: a fenced command block (a text-protocol call) and the fence label a system prompt asks for
FENCED_RE = re.compile(r"```[\w-]*\n.*?\n```", re.DOTALL)
FENCE_LABEL_RE = re.compile(r"```([A-Za-z][\w-]*)\n")


NO_TASK_TEXT = "I could not find a task I know in this conversation, so I have nothing to run."
NO_SOLUTION_TEXT = "I know this task but not how to solve it, so I have nothing to run."
DONE_TEXT = "Done. I ran all {n} steps of the task."
_LEADS = ("I'll run: ", "Next, I'll run: ", "Running: ", "Now: ")
_RETRY_LEAD = "That failed, so let me try that step again: "


@dataclass(frozen=True)
class Task:
    """A task folder the simulator knows: its instruction and solution steps."""

    task_id: str
    path: Path
    instruction: str
    steps: tuple[str, ...]


@dataclass(frozen=True)
class Progress:
    """Where a conversation stands: the next step index and which attempt at it."""

    step: int
    attempt: int


def default_task_dirs() -> list[Path]:
    """Every folder under ``<repo>/envs/`` that holds an ``instruction.md``."""
    envs = Path(__file__).resolve().parents[3] / "envs"
    if not envs.is_dir():
        return []
    return [d for d in sorted(envs.iterdir()) if _is_task(d)]


def _is_task(path: Path) -> bool:
    return (path / "instruction.md").is_file() or (
        (path / "task.toml").is_file() and (path / "steps").is_dir()
    )


def _step_names(path: Path) -> list[str]:
    try:
        config = tomllib.loads((path / "task.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [
        t["name"] for t in config.get("steps") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]


def load_task(path: Path) -> Task:
    """One simulator task from a task folder (single-step; see :func:`load_folder`)."""
    path = Path(path)
    instruction = (path / "instruction.md").read_text(encoding="utf-8").strip()
    steps = script_steps(path / "solution", solution_env(path, None))
    return Task(task_id=path.name, path=path, instruction=instruction, steps=steps)


def load_folder(path: Path) -> list[Task]:
    """The simulator tasks of a task folder: the task itself, or one per step of a
    multi-step task (``<id>/<step>``, each with its step's instruction and solve.sh)."""
    path = Path(path)
    names = _step_names(path)
    if not names:
        return [load_task(path)] if (path / "instruction.md").is_file() else []
    tasks = []
    for name in names:
        step_dir = path / "steps" / name
        if (step_dir / "instruction.md").is_file():
            instruction = (step_dir / "instruction.md").read_text(encoding="utf-8").strip()
            steps = script_steps(step_dir / "solution", solution_env(path, name))
            tasks.append(
                Task(task_id=f"{path.name}/{name}", path=step_dir, instruction=instruction, steps=steps)
            )
    return tasks


def load_tasks(dirs: Iterable[Path] | None = None) -> list[Task]:
    """Tasks from folders that are tasks themselves or hold task folders.

    ``None`` means :func:`default_task_dirs`. Tasks with an empty instruction are
    skipped; a folder seen twice is loaded once.
    """
    seen: set[Path] = set()
    tasks: list[Task] = []
    for d in default_task_dirs() if dirs is None else dirs:
        d = Path(d)
        candidates = [d] if _is_task(d) else sorted(d.iterdir()) if d.is_dir() else []
        for c in candidates:
            resolved = c.resolve()
            if resolved in seen or not _is_task(c):
                continue
            seen.add(resolved)
            tasks.extend(task for task in load_folder(c) if task.instruction)
    return tasks


def _squash(text: str) -> str:
    return " ".join(text.split())


def identify_task(messages: Sequence[Mapping[str, object]], tasks: Sequence[Task]) -> Task | None:
    """The task whose instruction (whitespace-normalised) appears in a message.

    When several match, the longest instruction wins, then the smallest task id.
    """
    texts = [_squash(message_text(m)) for m in messages]
    matches = [t for t in tasks if any(_squash(t.instruction) in text for text in texts)]
    if not matches:
        return None
    return sorted(matches, key=lambda t: (-len(t.instruction), t.task_id))[0]


def exit_code_of(text: str) -> int:
    """The exit code a tool result reports (first ``EXIT_CODE_RE`` match); none found ⇒ 0."""
    match = EXIT_CODE_RE.search(text)
    return int(match.group(1)) if match else 0


def read_progress(messages: Sequence[Mapping[str, object]], n_steps: int, max_attempts: int) -> Progress:
    """Replay the conversation's tool calls to find the next step and attempt.

    Each assistant tool call with a ``tool`` result moves the pointer: exit 0 ⇒
    next step; a failure nudged by "retry" (in the tool result itself, or in a
    ``user`` message before the next assistant message) ⇒ same step, attempt + 1,
    until ``max_attempts``; an un-nudged failure goes unnoticed ⇒ next step.
    Tool calls without a result are ignored. With no tools (a text protocol), an assistant
    message holding a fenced block is a call and the next ``user`` message its result.
    """
    step, attempt = 0, 0
    claimed: set[int] = set()
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        if not calls and FENCED_RE.search(message_text(message)):
            calls = [None]  # a text-protocol call: its result is the next user message
        for call in calls if isinstance(calls, list) else []:
            j = _result_index(messages, i, call, claimed) if call is not None else _text_result(messages, i)
            if j is None:
                continue
            claimed.add(j)
            result = message_text(messages[j])
            if exit_code_of(result) == 0:
                step, attempt = step + 1, 0
            elif _nudged(messages, j, result) and attempt + 1 < max_attempts:
                attempt += 1
            else:
                step, attempt = step + 1, 0
    return Progress(step=min(step, n_steps), attempt=attempt if step < n_steps else 0)


def fold_results(results: Sequence[str], n_steps: int, max_attempts: int) -> Progress:
    """The progress after these step results (the Terminus shape's: each a terminal screen,
    whose last ``exit code`` match counts; a ``retry`` in it is the nudge)."""
    step, attempt = 0, 0
    for result in results:
        codes = EXIT_CODE_RE.findall(result)
        if not codes or int(codes[-1]) == 0:
            step, attempt = step + 1, 0
        elif RETRY_RE.search(result) and attempt + 1 < max_attempts:
            attempt += 1
        else:
            step, attempt = step + 1, 0
    return Progress(step=min(step, n_steps), attempt=attempt if step < n_steps else 0)


def _result_index(
    messages: Sequence[Mapping[str, object]], start: int, call: object, claimed: set[int]
) -> int | None:
    """The ``tool`` message answering ``call``: by ``tool_call_id``, else the next unclaimed one."""
    call_id = call.get("id") if isinstance(call, Mapping) else None
    fallback: int | None = None
    for j in range(start + 1, len(messages)):
        m = messages[j]
        if m.get("role") == "assistant":
            break
        if m.get("role") != "tool" or j in claimed:
            continue
        if call_id is not None and m.get("tool_call_id") == call_id:
            return j
        if fallback is None and (call_id is None or m.get("tool_call_id") is None):
            fallback = j
    return fallback


def _text_result(messages: Sequence[Mapping[str, object]], start: int) -> int | None:
    """The ``user`` message answering a text-protocol call (before the next assistant message)."""
    for j in range(start + 1, len(messages)):
        role = messages[j].get("role")
        if role == "assistant":
            return None
        if role == "user":
            return j
    return None


def text_fence(messages: Sequence[Mapping[str, object]]) -> str:
    """The label of the first fenced block a system prompt shows (```` ```mswea_bash_command ````:
    mini-swe-agent's), which a text-protocol reply uses; ``bash`` when it shows none."""
    for message in messages:
        if message.get("role") == "system" and (found := FENCE_LABEL_RE.search(message_text(message))):
            return found.group(1)
    return "bash"


def _nudged(messages: Sequence[Mapping[str, object]], result_index: int, result: str) -> bool:
    if RETRY_RE.search(result):
        return True
    for m in messages[result_index + 1 :]:
        if m.get("role") == "assistant":
            return False
        if m.get("role") == "user" and RETRY_RE.search(message_text(m)):
            return True
    return False


def bash_tool_name(tools: Sequence[Mapping[str, object]]) -> str | None:
    """The function tool to call: one named ``bash``, else the first taking a ``command``."""
    candidates = [t.get("function") for t in tools if t.get("type", "function") == "function"]
    functions = [
        (name, f) for f in candidates if isinstance(f, Mapping) and isinstance(name := f.get("name"), str)
    ]
    if any(name == "bash" for name, _ in functions):
        return "bash"
    for name, f in functions:
        if "command" in schema_properties(f.get("parameters")):
            return name
    return None


class TaskModel:
    """A simulated task model of one skill; call it with a request to get the next turn."""

    def __init__(
        self,
        name: str,
        skill: Skill,
        tasks: Sequence[Task],
        on_unknown: Callable[[ChatRequest], None] | None = None,
    ) -> None:
        self.name = name
        self.skill = skill
        self.tasks = list(tasks)
        self.on_unknown = on_unknown  # told of a conversation holding no task it knows

    def __call__(self, request: ChatRequest) -> AssistantTurn:
        task = identify_task(request.messages, self.tasks)
        if task is None:
            if self.on_unknown is not None:
                self.on_unknown(request)
            return AssistantTurn(content=NO_TASK_TEXT)
        if not task.steps:
            return AssistantTurn(content=NO_SOLUTION_TEXT)
        n = len(task.steps)
        shaped = terminus.applies(request.messages)  # Terminus JSON answers (terminus.py)
        if shaped:
            progress = fold_results(terminus.step_results(request.messages), n, self.skill.max_attempts)
        else:
            progress = read_progress(request.messages, n, self.skill.max_attempts)
        if progress.step >= n:
            done = DONE_TEXT.format(n=n)
            return terminus.done_turn(done) if shaped else AssistantTurn(content=done)
        command, lead = self.propose(request.seed, task, progress, self.salt(request))
        prose = f"{lead}`{command}` (step {progress.step + 1} of {n})."
        if shaped:
            return terminus.step_turn(command, prose)
        tool = bash_tool_name(request.tools)
        if tool is None:
            return AssistantTurn(content=f"{prose}\n```{text_fence(request.messages)}\n{command}\n```")
        call = ToolCall(
            id=f"call_{sha256_hex(request.digest + ':tool:0')[:24]}",
            name=tool,
            arguments=canonical_json({"command": command}),
        )
        return AssistantTurn(content=prose, tool_calls=(call,), finish_reason="tool_calls")

    def propose(self, seed: int, task: Task, progress: Progress, salt: str = "") -> tuple[str, str]:
        """(command, prose lead) for a step; the RNG is seeded per (model, seed, task, step, attempt)
        and, for a model whose draws depend on the conversation (``salt``), that too."""
        k, attempt = progress.step, progress.attempt
        rng = random.Random(derive_seed(self.name, seed, task.task_id, k, attempt, *([salt] if salt else [])))
        draw = rng.random()
        wrong = draw < self.mistake_rate(task) if attempt == 0 else draw >= self.skill.recover_rate
        command = task.steps[k]
        if wrong:
            command = corrupt_command(command, rng)
        lead = _RETRY_LEAD if attempt > 0 else _LEADS[rng.randrange(len(_LEADS))]
        return command, lead

    def mistake_rate(self, task: Task) -> float:
        """The chance a first attempt at one of ``task``'s steps is wrong (the skill's)."""
        return self.skill.mistake_rate

    def salt(self, request: ChatRequest) -> str:
        """What besides the seed its draws depend on: nothing (a model of the skill table)."""
        return ""


def task_models(
    tasks: Sequence[Task], on_unknown: Callable[[ChatRequest], None] | None = None
) -> dict[str, TaskModel]:
    """One :class:`TaskModel` per row of :data:`SKILLS`."""
    return {name: TaskModel(name, skill, tasks, on_unknown) for name, skill in SKILLS.items()}
