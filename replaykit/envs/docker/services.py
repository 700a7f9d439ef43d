"""The image's own processes: what its ``ENTRYPOINT`` started stays up, as in Harbor.

Harbor starts a task container with the image's ``ENTRYPOINT`` and replaces only its
``CMD`` (by ``sleep infinity``); a server the entrypoint starts is still running when
the agent and the verifier act. replaykit does the same: the episode's PID 1 command
(``episode_container.INIT``) is handed to the entrypoint as its arguments. After the
container starts and its process list has settled (:func:`settle`), the processes then
running are the **services**. What the actions and the solution start in the background
runs on, as in Harbor, until the verifier has run; then everything else is killed, but
the services and their descendants are spared (:data:`KILL_SCRIPT`,
:func:`spared_host_pids`). A process the agent daemonised is reparented to PID 1, not
to a service, so it is killed then too — unless it asked to stay: a process started with
:data:`KEEP_MARK` (``REPLAYKIT_KEEP=1``) in its environment is kept like a service, with
its descendants, across the steps of a multi-step task (the ``terminus`` harness template's
tmux server, whose shell runs the agent's keystrokes). A timed-out action's own process
and its descendants are killed at once (:func:`descendants`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

#: In a process's environment, what keeps it (and its descendants) across actions.
KEEP_MARK = "REPLAYKIT_KEEP=1"
#: Kill every process but PID 1, this script, the services in ``$KEEP`` (container PIDs) and
#: the processes started with ``KEEP_MARK``, with their descendants (bash builtins only: no
#: process is forked while the list is read). ``/proc/PID/stat``'s parent PID follows the last ``)``.
KILL_SCRIPT = r"""
for p in /proc/[0-9]*; do
  while IFS= read -r -d '' kv; do
    [ "$kv" = REPLAYKIT_KEEP=1 ] && { KEEP="$KEEP ${p#/proc/}"; break; }
  done 2>/dev/null < "$p/environ"
done
for p in /proc/[0-9]*; do
  pid=${p#/proc/}; chain=$pid; spare=0; hops=0
  case " 1 $$ " in *" $pid "*) continue ;; esac
  while [ -n "$chain" ] && [ "$chain" != 0 ] && [ "$chain" != 1 ] && [ $hops -lt 64 ]; do
    case " $KEEP " in *" $chain "*) spare=1; break ;; esac
    { read -r s < "/proc/$chain/stat"; } 2>/dev/null || break
    s=${s##*) }; set -- $s; chain=$2; hops=$((hops + 1))
  done
  [ $spare = 1 ] || kill -KILL "$pid" 2>/dev/null
done
exit 0
"""
#: Lists the container's PIDs but the listing shell's own (its first line is its PID).
LIST_SCRIPT = r'echo $$; for p in /proc/[0-9]*; do echo "${p#/proc/}"; done'
SETTLE_SEC = 0.5
SETTLE_MAX_SEC = 10.0


def kill_argv(keep: Iterable[int]) -> tuple[list[str], dict[str, str]]:
    """The ``docker exec`` argv and environment of :data:`KILL_SCRIPT` sparing ``keep``."""
    pids = " ".join(str(p) for p in sorted(keep))
    return ["bash", "-c", KILL_SCRIPT], {"KEEP": pids}


def parse_listing(text: str) -> set[int]:
    """The PIDs printed by :data:`LIST_SCRIPT`, without the listing shell and PID 1."""
    lines = [line.strip() for line in text.splitlines() if line.strip().isdigit()]
    if not lines:
        return set()
    own = int(lines[0])
    return {int(p) for p in lines[1:]} - {own, 1}


def settle(
    listing: Callable[[], set[int] | None], quiet_sec: float = SETTLE_SEC, max_sec: float = SETTLE_MAX_SEC
) -> set[int]:
    """Poll ``listing`` until it stays the same for ``quiet_sec`` (at most ``max_sec``)."""
    deadline = time.monotonic() + max_sec
    last = listing()
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = listing()
        if now is None:
            return last or set()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_sec:
            break
    return last or set()


def _status_field(pid: int, name: str) -> list[str]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].split()
    except OSError:
        pass
    return []


def kept(pid: int) -> bool:
    """The process (a host PID) was started with :data:`KEEP_MARK` in its environment."""
    try:
        return KEEP_MARK.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def descendants(host_pids: list[int], root: int) -> set[int]:
    """Of the container's processes (host PIDs), ``root`` and those descending from it."""
    parent = {p: int((_status_field(p, "PPid") or ["0"])[0]) for p in host_pids}
    found = {root} & set(host_pids)
    for pid in host_pids:
        chain, hops = pid, 0
        while chain in parent and hops < 64:
            if chain == root:
                found.add(pid)
                break
            chain, hops = parent[chain], hops + 1
    return found


def spared_host_pids(host_pids: list[int], keep: set[int]) -> set[int]:
    """Of the container's processes (host PIDs), the services (``keep``: container PIDs), those
    started with :data:`KEEP_MARK`, and their descendants, which the host-side kill spares."""
    ns_pid = {p: int((_status_field(p, "NSpid") or [str(p)])[-1]) for p in host_pids}
    keep = keep | {ns_pid[p] for p in host_pids if kept(p)}
    parent = {p: int((_status_field(p, "PPid") or ["0"])[0]) for p in host_pids}
    spared: set[int] = set()
    for pid in host_pids:
        chain, hops = pid, 0
        while chain in ns_pid and hops < 64:
            if ns_pid[chain] in keep:
                spared.add(pid)
                break
            if ns_pid[chain] == 1:
                break
            chain, hops = parent.get(chain, 0), hops + 1
    return spared
