"""An outside agent's process: its output kept bounded (head and tail), stopped with its whole
group when asked or past its deadline, leaving nothing running."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from replaykit.agents.process import KEEP_BYTES, run_process

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
