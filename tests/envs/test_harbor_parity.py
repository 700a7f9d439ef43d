"""Harbor parity on the task format (issue 20), in-process: multi-step tasks see the
task-level tests/ under each step's /tests, network defaults and schema 1.4's
``network_mode``, unknown task.toml keys and the features a task uses, TB1 tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.envs.local import oracle
from replaykit.envs.tasks import load_task

pytestmark = pytest.mark.unit
REWARD = 'mkdir -p "$LOGS_DIR/verifier"\n'


def write(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def shared_helper_steps(folder: Path) -> Path:
    """A [[steps]] task whose steps' test.sh source a helper of the task's tests/."""
    helper = 'grade() { if eval "$1"; then echo 1; else echo 0; fi > "$LOGS_DIR/verifier/reward.txt"; }\n'
    return write(
        folder,
        {
            "task.toml": 'version = "1.0"\n[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n',
            "tests/helpers.sh": helper,
            "tests/test.sh": REWARD + '. "$TESTS_DIR/helpers.sh"\ngrade "[ -f b.txt ]"\n',
            "steps/one/instruction.md": "Write a.txt.\n",
            "steps/one/tests/test.sh": REWARD + '. "$TESTS_DIR/helpers.sh"\ngrade "[ -f a.txt ]"\n',
            "steps/one/solution/solve.sh": "touch a.txt\n",
            "steps/two/instruction.md": "Write b.txt.\n",
            "steps/two/solution/solve.sh": "touch b.txt\n",
        },
    )


def test_multi_step_tests_merge_the_task_level_tests(tmp_path: Path) -> None:
    task = load_task(shared_helper_steps(tmp_path / "shared-helper"))
    untouched, solved = oracle(task, {})
    assert untouched.reward == 0 and not untouched.infra_failure, untouched.detail
    assert solved.passed and solved.reward == 1, solved.detail
    assert "No such file" not in solved.detail
