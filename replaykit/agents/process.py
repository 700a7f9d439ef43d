"""An outside agent's process: started in its own session, its output kept (bounded), stopped
with its whole process group when the episode must stop (the bridge failed, its deadline passed,
Ctrl-C), never left behind: the kernel kills it when replaykit dies by any signal, kill -9 included
(``core/procs.dies_with_parent``), and its scratch folder (:func:`agent_scratch`) carries
replaykit's pid, so the next one swept a killed run's away. Its bridge's gate (``gate.py``) admits
it from the moment it starts to the moment it ends."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from replaykit.agents.gate import AgentGate
from replaykit.core.procs import dies_with_parent
from replaykit.core.stale import pid_alive

#: bytes of each of stdout and stderr kept (the head and the tail, half each)
KEEP_BYTES = 16_000


@dataclass(frozen=True)
class Finished:
    """How the agent's process ended."""

    returncode: int
    stdout: str  # bounded: its head and tail, with the elided size between
    stderr: str
    stopped: str = ""  # why replaykit stopped it (empty: it exited by itself)


class _Tail:
    """A stream's first and last ``KEEP_BYTES / 2`` bytes, read on a thread."""

    def __init__(self, stream: object) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: object) -> None:
        half = KEEP_BYTES // 2
        read = getattr(stream, "read1", None) or stream.read  # type: ignore[attr-defined]
        while chunk := read(65536):
            room = half - len(self.head)
            self.head += chunk[:room]
            self.tail += chunk[max(room, 0) :]
            if len(self.tail) > half:
                self.dropped += len(self.tail) - half
                del self.tail[: len(self.tail) - half]

    def text(self) -> str:
        self.thread.join(timeout=5)
        gap = f"\n[replaykit: {self.dropped} bytes elided]\n" if self.dropped else ""
        return bytes(self.head).decode(errors="replace") + gap + bytes(self.tail).decode(errors="replace")


@contextlib.contextmanager
def agent_scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder ``PREFIX<pid>-…`` this process owns, removed at the end; the folders of
    that prefix whose owner is gone (a run killed with -9) are swept first."""
    base = Path(tempfile.gettempdir())
    for left in base.glob(f"{prefix}*"):
        owner = left.name[len(prefix) :].split("-", 1)[0]
        if owner.isdigit() and not pid_alive(int(owner)):
            shutil.rmtree(left, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_process(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    timeout_s: float,
    stop: threading.Event,
    gate: AgentGate | None = None,
) -> Finished:
    """Run ``argv`` to its end, or until ``stop`` is set or ``timeout_s`` passes (then its
    process group is terminated, killed 5 s later). A ``KeyboardInterrupt`` stops it too, and
    propagates. ``gate``: its bridge's, which admits the process while it runs."""
    proc = subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # Ctrl-C reaches replaykit, which stops the whole group
        preexec_fn=dies_with_parent(signal.SIGKILL),  # and replaykit's death, however it dies
    )
    if gate is not None:
        gate.admit(proc.pid)
    try:
        return _finish(proc, timeout_s, stop)
    finally:
        if gate is not None:
            gate.end()


def _finish(proc: subprocess.Popen[bytes], timeout_s: float, stop: threading.Event) -> Finished:
    out, err = _Tail(proc.stdout), _Tail(proc.stderr)
    deadline = time.monotonic() + timeout_s
    stopped = ""
    try:
        while proc.poll() is None:
            if stop.wait(0.05):
                stopped = "the episode stopped"
            elif time.monotonic() > deadline:
                stopped = f"timed out after {timeout_s:g} s"
            if stopped:
                _stop(proc)
                break
    except BaseException:
        _stop(proc)
        raise
    code = proc.wait()
    _stop(proc)  # what it left running in its group
    return Finished(code, out.text(), err.text(), stopped)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
