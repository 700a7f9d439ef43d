"""The built-in proposer on a harness of one's own (issue 40 item 8): it reads the harness it is
given and, when none of its edits fits, the training's first epoch says so, once, and where to go."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from replaykit.models.reference.proposer import FOREIGN
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e  # drives the CLI

SAID = "the built-in proposer knows only the quickstart harness's edits; configure a model proposer: docs/training.md"

ONE_SHOT = '''"""My own harness: one shot, no tool loop."""


def solve(task, env, llm, ctx):
    reply = llm.chat.completions.create(
        messages=[{"role": "user", "content": task.instruction}], **ctx.llm_kwargs()
    )
    text = reply.choices[0].message.content or ""
    if text.strip():
        env.run(text)
'''


def test_a_harness_of_another_shape_is_told_on_the_first_epoch(tmp_path: Path) -> None:
    assert cli("init", "proj", cwd=tmp_path).returncode == 0
    harness = tmp_path / "proj" / "harness"
    (harness / "harness.py").write_text(ONE_SHOT)
    subprocess.run(["git", "commit", "-qam", "my harness"], cwd=harness, check=True)
    config = str(tmp_path / "proj" / "replaykit.yaml")
    shown = cli("train", config, "--epochs", "1", env={"COLUMNS": "80"}, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    notes = shown.stdout.replace("\n  ", " ").splitlines()  # a note wraps at 80, indented
    (first,) = [line for line in notes if line.startswith("epoch 0: ")]
    assert SAID in first and shown.stdout.count("knows only the quickstart") == 1, shown.stdout
    assert first == f"epoch 0: {FOREIGN} — empty diff: the estimator changed nothing"
    doc = json.loads(cli("train", config, "--epochs", "1", "--json", cwd=tmp_path).stdout)
    (epoch,) = doc["epochs"]  # the record keeps the proposer's words with the reason, as before
    assert epoch["decision"] == "skipped" and epoch["skipped"].endswith(f"({FOREIGN})")
