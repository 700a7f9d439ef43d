"""Verdict attribution through the real CLI: a flip the change caused is ``attributed``, one
where the episodes parted before any changed line ran is ``incidental`` (a 1-epoch training
whose candidate comes from a patch queue, so nothing is left to chance)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import git
import pytest

from replaykit.episodes.config import load_config
from replaykit.episodes.harness import commit_all
from replaykit.episodes.run import open_harness
from replaykit.models.reference.proposer import unified_diff
from replaykit.testing import project_root, write_config
from replaykit.train.attribution import changed_lines
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e

HARNESS = """from pathlib import Path


def solve(task, env, llm, ctx):
    if task.id == "coin":  # heads the first time this counter is read, tails the next: noise
        counter = ctx.params["counter"]
        env.run(
            f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}; "
            "if [ $((n % 2)) = 0 ]; then echo heads > coin; else echo tails > coin; fi"
        )
        marker = "baseline"
        return marker
    text = Path(__file__).with_name("greeting.txt").read_text().strip()
    env.run(f"mkdir -p greeting && echo '{text}' > greeting/hello.txt")
"""
CANDIDATE = HARNESS.replace('marker = "baseline"', 'marker = "candidate"')  # runs after the coin's action


def coin_task(root: Path) -> Path:
    task = root / "coin"
    shutil.copytree(project_root() / "envs" / "hello-file", task)
    (task / "instruction.md").write_text("Write heads into the file coin.\n")
    (task / "tests" / "test.sh").write_text(
        '#!/usr/bin/env bash\nmkdir -p "$LOGS_DIR/verifier"\n'
        'if [ "$(cat "$APP_DIR/coin")" = heads ]; then echo 1; else echo 0; fi > "$LOGS_DIR/verifier/reward.txt"\n'
    )
    return task


def test_changed_lines_are_the_diffs_own_and_a_data_file_counts_when_read() -> None:
    gone, added = changed_lines(
        {"h.py": b"a\nb\nc\n", "p.txt": b"x\n"}, {"h.py": b"a\nB\nc\nd\n", "p.txt": b"y\n", "new.py": b"z\n"}
    )
    assert gone == {"h.py": {2}, "p.txt": {0, 1}}
    assert added == {"h.py": {2, 4}, "p.txt": {0, 1}, "new.py": {1}}


def test_each_flip_is_attributed_or_incidental_with_where_the_episodes_parted(tmp_path: Path) -> None:
    tasks = [str(coin_task(tmp_path / "tasks")), str(project_root() / "envs" / "hello-file")]
    diff = unified_diff("harness.py", HARNESS, CANDIDATE) + unified_diff(
        "greeting.txt", "Hello, replaykit!\n", "Hello, world!\n"
    )
    config = write_config(
        tmp_path,
        {
            "panel.tasks": tasks,
            "panel.seeds": [0],
            "harness.params": {"counter": str(tmp_path / "counter")},
            "train.epochs": 1,
            "train.patch_surface": ["harness.py", "greeting.txt"],
            "train.estimator": {"kind": "patch_queue", "diffs": [diff]},
        },
    )
    repo = open_harness(load_config(config)).path
    (repo / "harness.py").write_text(HARNESS)
    (repo / "greeting.txt").write_text("Hello, replaykit!\n")
    commit_all(git.Repo(repo), "a harness under test")
    proc = cli("train", str(config), "--json")
    assert proc.returncode == 0, proc.stderr
    (epoch,) = json.loads(proc.stdout)["epochs"]
    assert sorted(epoch["verdict"]["regressions"]) == ["coin#0", "hello-file#0"]
    proc = cli("audit", epoch["verdict_id"], "--json", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    report: Any = json.loads(proc.stdout)
    flips = {f["unit"]: f for f in report["attribution"]["flips"]}
    coin, hello = flips["coin#0"], flips["hello-file#0"]
    assert coin["label"] == "incidental" and coin["changed_lines_before"] == []
    assert coin["parted"] == {
        "position": 0,
        "kind": "env",
        "part": "state",  # the same action and output; the coin came up otherwise
        "baseline": coin["parted"]["baseline"],
        "candidate": coin["parted"]["candidate"],
    }
    assert "parted at event 0 (env: state) before any changed line ran" in coin["reason"]
    assert hello["label"] == "attributed" and hello["parted"]["part"] == "action"
    assert "candidate:greeting.txt:0" in hello["changed_lines_before"]  # read before its first action
    assert (report["attribution"]["attributed"], report["attribution"]["incidental"]) == (1, 1)
    human = cli("audit", epoch["verdict_id"], "--config", str(config)).stdout
    assert "attribution of the movement: 1 attributed, 1 incidental" in human  # never "flips" (issue 40)
