"""An outside agent's process: its output kept bounded (head and tail), stopped with its whole
group when asked or past its deadline, leaving nothing running."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from replaykit.agents.process import KEEP_BYTES, agent_scratch, run_process

ENV = {"PATH": "/usr/bin:/bin"}


def test_output_is_kept_bounded_head_and_tail(tmp_path: Path) -> None:
    script = "head -c 100000 /dev/zero | tr '\\0' x; echo END; echo oops >&2; exit 4"
    done = run_process(["sh", "-c", script], ENV, tmp_path, 60, threading.Event())
    assert done.returncode == 4 and done.stopped == "" and done.stderr == "oops\n"
    assert done.stdout.startswith("x" * (KEEP_BYTES // 2)) and done.stdout.endswith("xxxEND\n")
    assert f"[replaykit: {100004 - KEEP_BYTES} bytes elided]" in done.stdout
    assert len(done.stdout) < KEEP_BYTES + 100


def test_a_stop_or_the_deadline_ends_the_whole_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pid_file}; wait"
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    started = time.monotonic()
    done = run_process(["sh", "-c", script], ENV, tmp_path, 120, stop)
    assert done.stopped == "the episode stopped" and time.monotonic() - started < 30
    child = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the agent's child {child} outlived its stop")
    late = run_process(["sleep", "300"], ENV, tmp_path, 0.5, threading.Event())
    assert late.stopped == "timed out after 0.5 s" and late.returncode != 0


@contextlib.contextmanager
def mock_tmpdir(folder: Path) -> Iterator[None]:
    before = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield
    finally:
        tempfile.tempdir = before


DRIVER = """
import sys, threading
from pathlib import Path
from replaykit.agents.process import agent_scratch, run_process
with agent_scratch("replaykit-test-lifetime-") as work:
    (work / "marker").write_text("x")
    print(work, flush=True)
    run_process(["sleep", "300"], {"PATH": "/usr/bin:/bin"}, work, 600, threading.Event())
"""


def test_kill_9_of_the_runner_ends_the_agent_and_the_next_run_sweeps_its_folder(tmp_path: Path) -> None:
    """issue 38 item 4: kill -9 of `run --agent mini-swe-agent` left `mini` running and its
    replaykit-mswea-* folder in TMPDIR. The runner here is a Python process driving an agent
    (``sleep 300``) the way the templates do."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    runner = subprocess.Popen([sys.executable, "-c", DRIVER], env=env, stdout=subprocess.PIPE, text=True)
    assert runner.stdout is not None
    work = Path(runner.stdout.readline().strip())
    assert work.name.startswith(f"replaykit-test-lifetime-{runner.pid}-") and (work / "marker").exists()
    agent = None
    for _ in range(100):  # the agent: the runner's child
        children = subprocess.run(
            ["pgrep", "-P", str(runner.pid)], capture_output=True, text=True
        ).stdout.split()
        if children:
            agent = int(children[0])
            break
        time.sleep(0.05)
    assert agent is not None
    runner.kill()
    runner.wait()
    for _ in range(100):
        if not Path(f"/proc/{agent}").exists():
            break
        time.sleep(0.05)
    else:
        os.kill(agent, 9)
        raise AssertionError(f"the agent {agent} outlived its runner's kill -9")
    assert work.exists()  # nothing could remove it then
    with mock_tmpdir(tmp_path), agent_scratch("replaykit-test-lifetime-") as mine:
        assert not work.exists() and mine.exists()  # the next run swept the dead runner's
    assert not mine.exists()
