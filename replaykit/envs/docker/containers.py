"""Container bookkeeping for the Docker environment: labels, ownership and cleanup.

Every container replaykit starts carries ``replaykit=1``, ``replaykit.episode`` and
``replaykit.owner = <host>:<pid>:<process start time>``. A process registers the
names of the containers it starts (before creating them, so a signal between create
and bookkeeping cannot orphan one); ``cleanup_all`` removes them and runs at exit.
SIGTERM/SIGHUP become ``SystemExit`` (where the default handler was in place) so
``finally`` blocks close episodes; after a SIGKILL, the next process to start a
container removes those whose owner process is gone (``remove_stale_containers``).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

from replaykit.core.errors import EnvError
from replaykit.envs.docker import images

LABEL = "replaykit"
OWNER_LABEL = "replaykit.owner"
EPISODE_LABEL = "replaykit.episode"

live: dict[str, Any] = {}  # container name -> container (or None before create returns)
live_networks: set[str] = set()  # per-episode networks of multi-container tasks (compose.py)
live_volumes: set[str] = set()  # per-episode volumes of compose tasks (compose.py)
live_lock = threading.Lock()
_installed = False
_swept: set[int] = set()


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def owner_id(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def episode_labels(episode: str, task_id: str) -> dict[str, str]:
    """The labels of an episode's containers (and of its sidecars, network and volumes):
    replaykit's, this process's as the owner, the episode's (``-`` when unnamed), the task's."""
    return {
        LABEL: "1",
        OWNER_LABEL: owner_id(),
        EPISODE_LABEL: episode or "-",
        "replaykit.task": task_id,
    }


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True  # another machine's container: not ours to judge
    pid = int(pid_text)
    if not Path(f"/proc/{pid}").exists():
        return False
    return _start_time(pid) == started


def remove_container(name: str) -> None:
    """Force-remove one container by name or id (gone already is fine)."""
    try:
        client = images.docker_client()
        client.api.remove_container(name, force=True, v=True)
    except Exception:
        pass
    with live_lock:
        live.pop(name, None)


def remove_network(name: str) -> None:
    """Remove one network by name or id (gone already is fine)."""
    try:
        images.docker_client().api.remove_network(name)
    except Exception:
        pass
    with live_lock:
        live_networks.discard(name)


def remove_volume(name: str) -> None:
    """Remove one volume by name (gone already is fine)."""
    try:
        images.docker_client().api.remove_volume(name, force=True)
    except Exception:
        pass
    with live_lock:
        live_volumes.discard(name)


def cleanup_all() -> None:
    """Remove every container (then network and volume) this process started (atexit and signal handler)."""
    with live_lock:
        names = list(live)
        networks = list(live_networks)
        volumes = list(live_volumes)
    for name in names:
        remove_container(name)
    for network in networks:
        remove_network(network)
    for volume in volumes:
        remove_volume(volume)


def remove_stale_containers() -> list[str]:
    """Remove labelled containers whose owner process (on this host) is gone."""
    client = images.docker_client()
    removed = []
    try:
        found = client.api.containers(all=True, filters={"label": f"{LABEL}=1"})
    except Exception as exc:
        raise EnvError(f"cannot list containers: {exc}") from None
    for info in found:
        owner = (info.get("Labels") or {}).get(OWNER_LABEL, "")
        if owner and not _owner_alive(owner):
            remove_container(info["Id"])
            removed.append(info["Id"][:12])
    try:
        networks = client.api.networks(filters={"label": f"{LABEL}=1"})
    except Exception:
        networks = []
    for net in networks:
        owner = (net.get("Labels") or {}).get(OWNER_LABEL, "")
        if owner and not _owner_alive(owner):
            remove_network(net["Id"])
            removed.append(net["Id"][:12])
    try:
        volumes = client.api.volumes(filters={"label": f"{LABEL}=1"}).get("Volumes") or []
    except Exception:
        volumes = []
    for vol in volumes:
        owner = (vol.get("Labels") or {}).get(OWNER_LABEL, "")
        if owner and not _owner_alive(owner):
            remove_volume(vol["Name"])
            removed.append(vol["Name"])
    return removed


def _on_signal(signum: int, frame: Any) -> None:
    # Unwind: ``finally`` blocks close the episode's container, atexit removes the rest.
    # (No Docker call here: the main thread may be inside one.)
    raise SystemExit(128 + signum)


def install_cleanup() -> None:
    """atexit + SIGTERM/SIGHUP handlers (only where the default handler is in place)."""
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(cleanup_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _on_signal)
    pid = os.getpid()
    if pid not in _swept:
        _swept.add(pid)
        remove_stale_containers()


_ncpu: dict[int, int] = {}


def host_cpus(client: Any) -> int:
    """The daemon's core count (asked once per process): task cpus are capped at it."""
    pid = os.getpid()
    if pid not in _ncpu:
        try:
            _ncpu[pid] = int(client.info().get("NCPU") or 0) or (os.cpu_count() or 1)
        except Exception:
            _ncpu[pid] = os.cpu_count() or 1
    return _ncpu[pid]


def cgroup_procs(container: Any) -> Path | None:
    """The host file listing the container's processes, when readable here (local daemon)."""
    try:
        container.reload()
        pid = int(container.attrs["State"]["Pid"])
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except Exception:
        return None
    candidates: list[Path] = []
    for line in lines:
        hid, controllers, path = ([*line.split(":", 2), "", ""])[:3]
        if "pids" in controllers.split(","):
            candidates.insert(0, Path("/sys/fs/cgroup/pids" + path) / "cgroup.procs")
        elif hid == "0" and controllers == "":
            candidates.append(Path("/sys/fs/cgroup" + path) / "cgroup.procs")
    for candidate in candidates:
        try:
            if str(pid) in candidate.read_text().split():
                return candidate
        except OSError:
            continue
    return None
