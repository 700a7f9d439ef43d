"""Concurrent first runs share one harness repo safely; what killed processes leave
(registered git worktrees, half-removed workspaces, half-made template repos, lock
files) is cleaned by the next run. Real processes throughout."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import git
import pytest

from replaykit.episodes.config_paths import TEMPLATES
from replaykit.testing import REPO_ROOT, write_config

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


def env_for(tmp: Path) -> dict[str, str]:
    scratch = tmp / "tmpdir"  # this test's own temp dir: workspaces and worktrees are isolated
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(scratch)}


def small(tmp: Path) -> Path:
    return write_config(
        tmp, {"panel.tasks": [str(REPO_ROOT / "envs" / "hello-file")], "panel.seeds": [0], "train.epochs": 1}
    )


def test_twelve_concurrent_first_runs_all_succeed_and_leave_one_valid_repo(tmp_path: Path) -> None:
    config = small(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "replaykit.cli", "run", str(config), "--json"],
            env=env_for(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(12)
    ]
    results = [(p.wait(timeout=600), p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    failed = [err for code, _, err in results if code != 0]
    assert failed == []
    repo = git.Repo(tmp_path / "harness")
    assert not repo.is_dirty(untracked_files=True) and repo.active_branch.name == "main"
    assert len(list(repo.iter_commits())) == 1 and sorted(
        p.name for p in (tmp_path / "harness").iterdir()
    ) == sorted([".git", *(p.name for p in (TEMPLATES / "quickstart").iterdir() if p.name != "__pycache__")])
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    assert len({out for _, out, _ in results}) >= 1  # every run printed its run document


KILLERS = {
    # a training killed while its proposal worktree is registered
    "worktree": """
import os, signal, sys, git
from replaykit.train import gitops
repo = git.Repo(sys.argv[1])
with gitops.worktree(repo, repo.head.commit.hexsha):
    os.kill(os.getpid(), signal.SIGKILL)
""",
    # killed between renaming a workspace to .removing-<pid> and deleting it
    "workspace": """
import os, signal, sys, shutil
from pathlib import Path
from replaykit.envs import local
from replaykit.envs.tasks import load_task
env = local.LocalEnv(load_task(Path(sys.argv[2])), workspace=Path(sys.argv[3]))
env.start()
local.shutil.rmtree = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
env.close()
""",
    # a first run killed while it materialises the template
    "template": """
import os, signal, sys, git
from pathlib import Path
from replaykit.episodes import harness
harness.commit_all = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
harness.materialise_template("quickstart", Path(sys.argv[4]))
""",
}


def test_a_killed_runs_leftovers_are_cleaned_by_the_next_run(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    config = small(tmp_path)
    first = subprocess.run(
        [sys.executable, "-m", "replaykit.cli", "run", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert first.returncode == 0, first.stderr
    ws_parent = Path(env["TMPDIR"]) / "replaykit-ws"
    ws_parent.mkdir(exist_ok=True)
    args = [
        str(tmp_path / "harness"),
        str(REPO_ROOT / "envs" / "hello-file"),
        str(ws_parent / "killedworkspace"),
        str(tmp_path / "harness"),
    ]
    for name, script in KILLERS.items():
        proc = subprocess.run(
            [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == -signal.SIGKILL, (name, proc.stderr)
    repo = git.Repo(tmp_path / "harness")
    assert (
        len(repo.git.worktree("list").splitlines()) == 2
    )  # the killed training's worktree is still registered
    assert [p for p in ws_parent.iterdir() if ".removing-" in p.name]
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".harness.tmp-")]
    for i in range(3):  # lock files an older version left behind, one per episode
        (ws_parent / f".episode{i}.lock").write_text("")
    held = ws_parent / ".held-by-a-live-process.lock"
    with open(held, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        train = subprocess.run(
            [sys.executable, "-m", "replaykit.cli", "train", str(config), "--record-mode", "all"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert train.returncode == 0, train.stderr
        assert held.exists()  # a live holder's lock is never taken away
    assert len(repo.git.worktree("list").splitlines()) == 1
    assert not [p for p in Path(env["TMPDIR"]).iterdir() if p.name.startswith("replaykit-wt-")]
    assert [p.name for p in ws_parent.iterdir() if p.name.startswith(".") and p.name != held.name] == []
    assert [p for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
