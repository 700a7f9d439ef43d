"""The terminus harness template's answer parser and output limit (Terminus-2's rules), and the
reference simulator's Terminus JSON shape, in process (the tmux side: tests/envs/docker/test_terminus.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from replaykit.episodes.config_paths import TEMPLATES
from replaykit.models.reference.protocol import parse_chat_request
from replaykit.models.reference.simulator import SKILLS, TaskModel, fold_results, load_task

pytestmark = pytest.mark.unit


def template() -> ModuleType:
    spec = importlib.util.spec_from_file_location("terminus_harness", TEMPLATES / "terminus" / "harness.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


H = template()
GOOD = {
    "analysis": "a",
    "plan": "p",
    "commands": [{"keystrokes": "ls\n", "duration": 0.1}],
    "task_complete": False,
}


def test_a_well_formed_answer_gives_its_commands() -> None:
    answer = H.parse_answer(json.dumps(GOOD))
    assert answer == {"commands": [("ls\n", 0.1)], "complete": False, "error": "", "warnings": []}
    done = H.parse_answer(json.dumps({**GOOD, "commands": [], "task_complete": "true"}))
    assert done["complete"] is True and done["commands"] == []


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("I will run ls now.", "No valid JSON found in response"),
        ('{"analysis": "a", "plan": "p"}', "Missing required fields: commands"),
        ('{"analysis": "a", "plan": "p", "commands": "ls"}', "Field 'commands' must be an array"),
        (
            '{"analysis": "a", "plan": "p", "commands": [{"duration": 1}]}',
            "Command 1 missing required 'keystrokes' field",
        ),
        (
            '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": 3}]}',
            "Command 1 'keystrokes' must be a string",
        ),
        ('{"analysis": "a", "plan": "p", "commands": [], }', "Invalid JSON: "),
    ],
)
def test_a_malformed_answer_is_an_error_line(text: str, error: str) -> None:
    answer = H.parse_answer(text)
    assert answer["error"].startswith(error) and answer["commands"] == []
    assert H.PARSE_ERROR.format(feedback=H.feedback_of(answer)).startswith(
        f"Previous response had parsing errors:\nERROR: {error}"
    )


def test_warnings_and_the_missing_brace_auto_fix() -> None:
    text = 'Sure:\n{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls", "x": 1}, {"keystrokes": "pwd\\n"}]'
    answer = H.parse_answer(text)
    assert answer["error"] == "" and answer["commands"] == [("ls", 1.0), ("pwd\n", 1.0)]
    assert answer["warnings"][:2] == [
        "AUTO-CORRECTED: Fixed incomplete JSON by adding missing closing brace - please fix this in future responses",
        "Extra text detected before JSON object",
    ]
    assert "Command 1: Missing duration field, using default 1.0" in answer["warnings"]
    assert "Command 1: Unknown fields: x" in answer["warnings"]
    assert any(w.startswith("Command 1 should end with newline") for w in answer["warnings"])
    # a finished task's bad command is only a warning (Terminus-2 accepts the completion)
    finished = H.parse_answer('{"analysis": "a", "plan": "p", "commands": [7], "task_complete": true}')
    assert (
        finished["error"] == ""
        and finished["complete"]
        and "Command 1 must be an object" in finished["warnings"]
    )


def test_output_is_limited_to_head_and_tail() -> None:
    text = "a" * 6000 + "b" * 6000
    limited = H.limit_output(text, 10000)
    assert limited.startswith(
        "a" * 5000 + "\n[... output limited to 10000 bytes; 2000 interior bytes omitted ...]\n"
    )
    assert limited.endswith("b" * 5000) and H.limit_output("short", 10000) == "short"


# -- the simulator's side -------------------------------------------------------------------


@pytest.fixture()
def task(tmp_path: Path) -> Any:
    folder = tmp_path / "two-steps"
    (folder / "solution").mkdir(parents=True)
    (folder / "instruction.md").write_text("Make a folder out and a file out/a.txt.\n")
    (folder / "solution" / "solve.sh").write_text("mkdir out\ntouch out/a.txt\n")
    return load_task(folder)


def ask(task: Any, messages: list[dict[str, str]], model: str = "reference-oracle") -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": messages}
    turn = TaskModel(model, SKILLS[model], [task])(parse_chat_request(body))
    assert not turn.tool_calls and turn.content is not None
    return dict(json.loads(turn.content))


def test_the_simulator_answers_terminus_json_step_by_step(task: Any) -> None:
    prompt = H.PROMPT.format(instruction=task.instruction, terminal_state="Current Terminal Screen:\n$")
    messages = [{"role": "user", "content": prompt}]
    first = ask(task, messages)
    assert (
        first["commands"] == [{"keystrokes": "mkdir out\n", "duration": 5.0}]
        and first["task_complete"] is False
    )
    messages += [
        {"role": "assistant", "content": json.dumps(first)},
        {"role": "user", "content": "New Terminal Output:\n$ mkdir out\n$"},
    ]
    second = ask(task, messages)
    assert second["commands"][0]["keystrokes"] == "touch out/a.txt\n"
    # a malformed answer and its parse-error turn ran nothing: the step is still the second
    messages += [
        {"role": "assistant", "content": "no json"},
        {"role": "user", "content": H.PARSE_ERROR.format(feedback="ERROR: x")},
    ]
    assert ask(task, messages)["commands"][0]["keystrokes"] == "touch out/a.txt\n"
    messages += [
        {"role": "assistant", "content": json.dumps(second)},
        {"role": "user", "content": "New Terminal Output:\n$"},
    ]
    done = ask(task, messages)
    assert done["task_complete"] is True and done["commands"] == []
    messages += [
        {"role": "assistant", "content": json.dumps(done)},
        {"role": "user", "content": H.CONFIRM.format(terminal_output="$")},
    ]
    assert ask(task, messages) == done  # asked to confirm: the same answer again


def test_terminus_results_count_the_last_exit_code_and_the_retry_nudge() -> None:
    ok, failed, nudged = (
        "exit code 1\n$ x\nexit code 0",
        "exit code 0\n$ x\nexit code 2",
        "exit code 2: retry",
    )
    assert fold_results([ok], 3, 4) == fold_results([failed], 3, 4)  # un-nudged failure goes unnoticed
    assert (fold_results([ok], 3, 4).step, fold_results([nudged], 3, 4).step) == (1, 0)
    assert fold_results([nudged], 3, 4).attempt == 1
    assert fold_results([nudged] * 4, 3, 4).step == 1  # after max_attempts it moves on
