"""Docker faults and resource limits: what ends an episode as an infrastructure failure.

An episode's container can stop being usable: its PID 1 dies (OOM, killed, a fork
bomb), a process is OOM-killed at the memory limit, the writable layer outgrows
``storage_mb``, or no new process can start (the ``pids_limit`` is exhausted). The
Docker environment then marks itself *dead* with a fixed, deterministic reason: the
action that hit it returns exit code 137 with ``[replaykit: <reason>; the episode is
stopped]`` on stderr, later actions return the same without running, and the grade
is ``Grade(infra_failure=True)`` naming the reason. The run goes on with the other
episodes; the container is removed as always.

Limits (task.toml ``[environment]``): ``cpus`` → CPU quota, ``memory_mb`` → memory
limit with no swap on top, ``pids_limit`` (replaykit's field; default
:data:`DEFAULT_PIDS_LIMIT`) → the container's process limit, ``storage_mb`` → the
writable layer's size. Storage is enforced by the storage driver where it can
(``--storage-opt size``: overlay2 on xfs with ``pquota``, btrfs, zfs, devicemapper);
elsewhere (overlay2 on ext4, the usual case) replaykit's watchdog measures the
container's overlay upper directory while an action runs (every
:data:`STORAGE_POLL_SEC`) and stops the episode once it exceeds the limit, so a
writer can overshoot by what it writes in one poll interval. Without a readable
upper directory (a remote daemon) storage is not enforced; ``metadata()`` says
which (``limits.storage_enforced``: ``driver``, ``watchdog`` or ``no``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

DEFAULT_PIDS_LIMIT = 1024
STORAGE_POLL_SEC = 0.25
DEAD_EXIT_CODE = 137


def pids_limit(config: Mapping[str, object]) -> int:
    """A task's process limit: task.toml's ``environment.pids_limit`` when it is a positive
    integer, else :data:`DEFAULT_PIDS_LIMIT`."""
    table = config.get("environment")
    value = table.get("pids_limit") if isinstance(table, dict) else None
    return (
        int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0
        else DEFAULT_PIDS_LIMIT
    )


def dead_marker(reason: str) -> str:
    return f"\n[replaykit: {reason}; the episode is stopped]\n"


def stopped_reason(container: Any) -> str | None:
    """None while the container runs, else why it stopped (deterministic words only)."""
    try:
        container.reload()
        state = container.attrs.get("State") or {}
    except Exception:
        return "the container is gone"
    if state.get("Running") and not state.get("Paused"):
        return None
    if state.get("OOMKilled"):
        return "the container ran out of memory (its PID 1 was OOM-killed)"
    return f"the container stopped (its PID 1 exited with code {state.get('ExitCode')})"


def _cgroup_file(pid: int, controller: str, name: str) -> Path | None:
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, controllers, path = [*line.split(":", 2), "", ""][:3]
        if controller in controllers.split(","):
            candidate = Path(f"/sys/fs/cgroup/{controller}{path}") / name
        elif hid == "0" and controllers == "":
            candidate = Path(f"/sys/fs/cgroup{path}") / ("memory.events" if controller == "memory" else name)
        else:
            continue
        if candidate.is_file():
            return candidate
    return None


def _oom_kills(path: Path | None) -> int:
    if path is None:
        return 0
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _du_bytes(root: Path) -> int:
    total = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


def _alive(pid: int) -> bool:
    """Running (not a zombie waiting for PID 1 to reap it, not gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _procs(path: Path) -> list[int]:
    try:
        return [int(p) for p in path.read_text().split() if _alive(int(p))]
    except (OSError, ValueError):
        return []


def kill_leftovers(
    client: Any,
    container: Any,
    procs_file: Path,
    rounds: int = 5,
    spare: Callable[[list[int]], set[int]] | None = None,
) -> bool:
    """Kill (from the host) every process of the container but its PID 1 (and those
    ``spare`` picks of the container's host PIDs: the image's services), with the
    container frozen so nothing forks meanwhile. True when processes are still left
    (e.g. not root here): the episode cannot go on."""
    try:
        init = int(container.attrs["State"]["Pid"])
    except (KeyError, TypeError, ValueError):
        return False

    def leftovers() -> list[int]:
        procs = _procs(procs_file)
        kept = spare(procs) if spare is not None else set()
        return [p for p in procs if p != init and p not in kept]

    for _ in range(rounds):
        left = leftovers()
        if not left:
            return False
        try:
            client.api.pause(container.id)
        except Exception:
            pass
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            client.api.unpause(container.id)
        except Exception:
            pass
        time.sleep(0.05)
    return bool(leftovers())


class Watchdog:
    """Watches one container for OOM kills and (without driver quotas) its storage use."""

    def __init__(self, container: Any, storage_mb: int, driver_enforced: bool) -> None:
        self.storage_bytes = storage_mb * 1024 * 1024
        self.storage_mb = storage_mb
        self.upper: Path | None = None
        self.oom_file: Path | None = None
        self._next_check = 0.0
        try:
            container.reload()
            pid = int(container.attrs["State"]["Pid"])
            upper = (container.attrs.get("GraphDriver") or {}).get("Data", {}).get("UpperDir")
        except Exception:
            pid, upper = 0, None
        if pid:
            self.oom_file = _cgroup_file(pid, "memory", "memory.oom_control")
        if not driver_enforced and upper and os.access(upper, os.R_OK | os.X_OK):
            self.upper = Path(upper)
        self.enforced = "driver" if driver_enforced else ("watchdog" if self.upper else "no")
        self.oom_baseline = _oom_kills(self.oom_file)

    def storage_exceeded(self, force: bool = False) -> str | None:
        """The storage reason when the writable layer is over the limit (checked at most every poll)."""
        if self.upper is None:
            return None
        now = time.monotonic()
        if not force and now < self._next_check:
            return None
        used = _du_bytes(self.upper)
        # a big writable layer costs more to measure: poll less often (at most ~10% of the time)
        self._next_check = time.monotonic() + max(STORAGE_POLL_SEC, 10 * (time.monotonic() - now))
        if used > self.storage_bytes:
            return f"the container wrote more than its storage limit of {self.storage_mb} MB"
        return None

    def oom_killed(self, memory_mb: int) -> str | None:
        """The memory reason when a process was OOM-killed since the last check."""
        count = _oom_kills(self.oom_file)
        if count > self.oom_baseline:
            self.oom_baseline = count
            return f"a process ran out of memory at the container's limit of {memory_mb} MB (OOM-killed)"
        return None
