"""Which solve.sh the simulated models play line by line, and which as one script."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from replaykit.models.reference.scripts import script_steps, solution_env, splittable


@pytest.mark.parametrize(
    "script",
    [
        "#!/bin/bash\nset -e\necho a > f\ncd release && sha256sum x > SUMS\nX=1 cmd arg\n",
        "mkdir -p a b\nprintf 'x\\n' | sort > out.txt\n",
    ],
)
def test_independent_lines_are_split(script: str) -> None:
    assert splittable(script)


@pytest.mark.parametrize(
    "script",
    [
        "cat > f <<EOF\nhello\nEOF\n",
        "cd sub\ntouch here\n",
        "X=1\necho $X > f\n",
        "if true; then\n  touch f\nfi\n",
        "for i in 1 2; do echo $i; done\n",
        "echo 'multi\nline' > f\n",
        "cp $SOLUTION_DIR/patch.diff .\n",
        "grep x f |\n  sort\n",
        "export A=1\ntouch f\n",
    ],
)
def test_dependent_lines_run_as_one_script(script: str) -> None:
    assert not splittable(script)


def run_steps_in(tmp: Path, steps: tuple[str, ...]) -> None:
    for command in steps:
        subprocess.run(["bash", "-c", command], cwd=tmp, check=True, timeout=30)


def test_whole_script_with_heredoc_and_env(tmp_path: Path) -> None:
    sol = tmp_path / "task" / "solution"
    sol.mkdir(parents=True)
    (sol / "solve.sh").write_text("#!/bin/bash\ncat > out.txt <<EOF\n$GREETING\nEOF\n")
    (tmp_path / "task" / "task.toml").write_text(
        'version = "2.0"\n[solution.env]\nGREETING = "hi there"\nSECRET = "${HOST_TOKEN}"\n'
    )
    env = solution_env(tmp_path / "task", None)
    assert env == {"GREETING": "hi there"}  # host-templated values are never handed to the model
    (step,) = script_steps(sol, env)
    work = tmp_path / "work"
    work.mkdir()
    run_steps_in(work, (step,))
    assert (work / "out.txt").read_text() == "hi there\n"


def test_solution_folder_is_unpacked_for_solution_dir(tmp_path: Path) -> None:
    sol = tmp_path / "solution"
    (sol / "data").mkdir(parents=True)
    (sol / "data" / "fix.txt").write_text("fixed\n")
    (sol / "solve.sh").write_text('cp "$SOLUTION_DIR/data/fix.txt" result.txt\n')
    steps = script_steps(sol, {})
    assert len(steps) == 1 and steps == script_steps(sol, {})  # deterministic bytes
    work = tmp_path / "work"
    work.mkdir()
    run_steps_in(work, steps)
    assert (work / "result.txt").read_text() == "fixed\n"
    assert sorted(p.name for p in work.iterdir()) == ["result.txt"]
