"""Task loading: the sample tasks, malformed folders, panels."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from replaykit.core.errors import TaskError
from replaykit.envs.tasks import Task, load_panel, load_task, task_digest
from replaykit.testing import QUICKSTART_TASKS

REPO = Path(__file__).resolve().parents[2]
ENVS = REPO / "envs"
SAMPLE_IDS = sorted(p.name for p in ENVS.iterdir() if (p / "task.toml").is_file())

TOML = """version = "2.0"

[metadata]
difficulty = "easy"
category = "file-operations"
tags = ["bash"]

[verifier]
timeout_sec = 10.0

[agent]
timeout_sec = 60.0

[environment]
build_timeout_sec = 60.0
cpus = 1
memory_mb = 256
storage_mb = 512
workdir = "/app"
allow_internet = false
"""


def make_task(folder: Path, toml: str = TOML, instruction: str | None = "Do it.\n") -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(toml)
    if instruction is not None:
        (folder / "instruction.md").write_text(instruction)
    (folder / "tests" / "test.sh").write_text(
        'mkdir -p "$LOGS_DIR/verifier"; echo 1 > "$LOGS_DIR/verifier/reward.txt"\n'
    )
    return folder


def test_at_least_seven_sample_tasks() -> None:
    assert len(SAMPLE_IDS) >= 7


@pytest.mark.parametrize("task_id", SAMPLE_IDS)
def test_every_sample_task_loads_with_harbor_fields(task_id: str) -> None:
    task = load_task(ENVS / task_id)
    assert task.config["version"] == "2.0" and {"difficulty", "category", "tags"} <= set(task.metadata)
    assert task.workdir == "/app" and task.allow_internet is False and task.instruction.strip()
    assert task.has_solution and (task.environment_dir / "Dockerfile").is_file()


@pytest.mark.parametrize("task_id", QUICKSTART_TASKS)
def test_sample_task_layout(task_id: str) -> None:
    """The quickstart tasks' stricter rules (one-line solve.sh steps, Debian base)."""
    task = load_task(ENVS / task_id)
    assert task.id == task_id
    assert task.config["version"] == "2.0"
    assert {"difficulty", "category", "tags"} <= set(task.metadata)
    assert task.workdir == "/app" and task.allow_internet is False
    assert task.agent_timeout_sec > 0 and task.verifier_timeout_sec > 0
    assert task.cpus >= 1 and task.memory_mb > 0 and task.storage_mb > 0
    environment = task.config["environment"]
    assert isinstance(environment, dict)
    assert set(environment) >= {"build_timeout_sec", "cpus", "memory_mb", "storage_mb"}
    assert task.instruction.strip()
    dockerfile = (task.environment_dir / "Dockerfile").read_text()
    assert dockerfile.startswith("FROM debian:bookworm-slim")
    assert "WORKDIR /app" in dockerfile
    assert ("COPY files/ /app/" in dockerfile) == task.files_dir.is_dir()
    assert task.has_solution
    lines = (task.solution_dir / "solve.sh").read_text().splitlines()
    assert lines[0].startswith("#!")
    steps = [line for line in lines[1:] if line.strip()]
    assert 2 <= len(steps) <= 4, steps
    for step in steps:  # one-liners a simulator can replay as separate bash calls
        assert not step.startswith("#") and not step.rstrip().endswith("\\")
        assert not step.startswith("cd ") or "&&" in step
    test_sh = (task.tests_dir / "test.sh").read_text()
    assert "$LOGS_DIR/verifier/reward.txt" in test_sh and "/logs/verifier" not in test_sh


def test_digest_is_stable_and_content_sensitive(tmp_path: Path) -> None:
    folder = make_task(tmp_path / "t")
    first = load_task(folder)
    assert load_task(folder).digest == first.digest == task_digest(folder)
    os.utime(folder / "instruction.md", (1, 1))
    assert task_digest(folder) == first.digest
    (folder / "instruction.md").write_text("Do it again.\n")
    assert task_digest(folder) != first.digest
    copy = shutil.copytree(folder, tmp_path / "elsewhere" / "t")
    assert task_digest(copy) == task_digest(folder)


def test_task_is_hashable_and_frozen(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "t"))
    assert isinstance(hash(task), int)
    with pytest.raises(AttributeError):
        task.id = "other"  # type: ignore[misc]


def test_defaults_when_optional_sections_missing(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "t", toml='version = "2.0"\n'))
    assert task.workdir == "/app" and task.allow_internet is True and task.network_mode == "public"
    assert task.verifier_timeout_sec == 600.0 and task.cpus == 1


def test_missing_task_toml(tmp_path: Path) -> None:
    folder = make_task(tmp_path / "t")
    (folder / "task.toml").unlink()
    with pytest.raises(TaskError, match=r"task\.toml: missing"):
        load_task(folder)


def test_missing_instruction(tmp_path: Path) -> None:
    folder = make_task(tmp_path / "t", instruction=None)
    with pytest.raises(TaskError, match=r"t/instruction\.md: missing"):
        load_task(folder)


def test_empty_instruction(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"instruction\.md: empty"):
        load_task(make_task(tmp_path / "t", instruction="  \n"))


def test_missing_test_sh(tmp_path: Path) -> None:
    folder = make_task(tmp_path / "t")
    (folder / "tests" / "test.sh").unlink()
    with pytest.raises(TaskError, match=r"tests/test\.sh: missing"):
        load_task(folder)


def test_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"task\.toml: invalid TOML"):
        load_task(make_task(tmp_path / "t", toml='version = "2.0"\n[verifier\n'))


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('version = "0.9"\n', r"task\.toml: field 'version' is '0\.9'; expected \"1\.0\" or \"2\.0\""),
        ("[agent]\ntimeout_sec = 5\n", r"task\.toml: field 'version' is missing"),
        ("version = 2.0\n", r"field 'version' is 2\.0"),
    ],
)
def test_bad_version(tmp_path: Path, toml: str, expected: str) -> None:
    with pytest.raises(TaskError, match=expected):
        load_task(make_task(tmp_path / "t", toml=toml))


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ('[verifier]\ntimeout_sec = "30"\n', "verifier.timeout_sec"),
        ("[agent]\ntimeout_sec = -1\n", "agent.timeout_sec"),
        ("[environment]\ncpus = 1.5\n", "environment.cpus"),
        ("[environment]\nmemory_mb = true\n", "environment.memory_mb"),
        ('[environment]\nallow_internet = "no"\n', "environment.allow_internet"),
        ("[environment]\nworkdir = 3\n", "environment.workdir"),
        ('[metadata]\ntags = "bash"\n', "metadata.tags"),
        ('verifier = "fast"\n', "verifier"),
    ],
)
def test_wrong_types_name_file_and_field(tmp_path: Path, extra: str, field: str) -> None:
    toml = 'version = "2.0"\n' + extra
    with pytest.raises(TaskError, match=rf"task\.toml: field '{field}' must be a"):
        load_task(make_task(tmp_path / "t", toml=toml))


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="not a task folder"):
        load_task(tmp_path / "nope")


def test_load_panel_glob_sorted() -> None:
    tasks = load_panel(["envs/*"], REPO)
    assert [t.id for t in tasks] == SAMPLE_IDS
    assert all(isinstance(t, Task) for t in tasks)


def test_load_panel_paths_and_overlap(tmp_path: Path) -> None:
    make_task(tmp_path / "b")
    make_task(tmp_path / "a")
    (tmp_path / "notes").mkdir()  # a folder without task.toml is ignored by a glob
    tasks = load_panel(["b", "*", str(tmp_path / "a")], tmp_path)
    assert [t.id for t in tasks] == ["a", "b"]


def test_load_panel_duplicate_ids(tmp_path: Path) -> None:
    make_task(tmp_path / "one" / "same")
    make_task(tmp_path / "two" / "same")
    with pytest.raises(TaskError, match="duplicate task id 'same'"):
        load_panel(["one/*", "two/*"], tmp_path)


@pytest.mark.parametrize("pattern", ["missing-task", "nothing-*"])
def test_load_panel_no_match(tmp_path: Path, pattern: str) -> None:
    make_task(tmp_path / "a")
    with pytest.raises(TaskError, match=re.escape(f"panel pattern {pattern!r} matches no task folder")):
        load_panel(["a", pattern], tmp_path)


def test_load_panel_empty(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="panel is empty"):
        load_panel([], tmp_path)


def test_load_panel_propagates_malformed_task(tmp_path: Path) -> None:
    make_task(tmp_path / "bad", toml='version = "9"\n')
    with pytest.raises(TaskError, match="field 'version'"):
        load_panel(["*"], tmp_path)
