"""The processes replaykit starts and the connections that reach it, as Linux tells them.

- :func:`dies_with_parent`: a ``preexec_fn`` that asks the kernel to send the child ``SIGTERM``
  when the process that started it dies, by any signal, ``kill -9`` included
  (``PR_SET_PDEATHSIG``; it survives ``exec``). A parent already gone before the child got there
  is caught too (its parent pid is no longer the one that started it).
- :func:`peer_pids`: the processes that hold the other end of a loopback TCP connection
  (``/proc/net/tcp`` names the socket's inode, ``/proc/PID/fd`` who holds it), so a server can
  admit only connections a known process opened.
- :func:`port_holders`: who listens on a loopback port (a busy port's message names them).

Elsewhere than Linux these say "unknown" (None / no-op) rather than guess.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
from collections.abc import Callable, Iterable
from pathlib import Path

PR_SET_PDEATHSIG = 1
PROC = Path("/proc")


def dies_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``subprocess.Popen(preexec_fn=…)`` that makes the child get ``sig`` when this process dies.
    The kernel watches the *thread* that starts the child: start it from a thread that lives as
    long as the child should (the main thread, or one that waits for the child)."""
    parent = os.getpid()
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name, use_errno=True) if name else None

    def arm() -> None:
        if libc is None:
            return
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # it died before the child got here: nothing would signal it
            os.kill(os.getpid(), sig)

    return arm


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, session, …


def descendants(root: int) -> set[int]:
    """``root`` and every live process below it."""
    children: dict[int, list[int]] = {}
    for entry in _pids():
        fields = _stat_fields(entry)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(entry)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _pids() -> Iterable[int]:
    with contextlib.suppress(OSError):
        return [int(name) for name in os.listdir(PROC) if name.isdigit()]
    return []


def _hex_addr(host: str, port: int) -> str:
    """``/proc/net/tcp``'s spelling of an IPv4 address and port (little-endian address)."""
    packed = bytes(int(part) for part in host.split("."))
    return f"{int.from_bytes(packed, 'little'):08X}:{port:04X}"


def _socket_inodes(local: tuple[str, int], remote: tuple[str, int] | None) -> set[int] | None:
    """Inodes of the TCP sockets bound to ``local`` (connected to ``remote``; None: listening)."""
    try:
        lines = (PROC / "net" / "tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    want_local = _hex_addr(*local)
    want_remote = _hex_addr(*remote) if remote else "00000000:0000"
    found = set()
    for line in lines:
        parts = line.split()
        if len(parts) > 9 and parts[1] == want_local and parts[2] == want_remote:
            found.add(int(parts[9]))
    return found


def _holders(inodes: set[int], pids: Iterable[int]) -> set[int]:
    links = {f"socket:[{inode}]" for inode in inodes}
    held = set()
    for pid in pids:
        folder = PROC / str(pid) / "fd"
        try:
            fds = os.listdir(folder)
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(folder / fd) in links:
                    held.add(pid)
                    break
    return held


def peer_pids(peer: tuple[str, int], server: tuple[str, int], among: Iterable[int]) -> set[int] | None:
    """Which of ``among`` hold the client end of the connection ``peer`` → ``server`` (None: this
    system cannot say: no ``/proc``)."""
    inodes = _socket_inodes(peer, server)
    if inodes is None:
        return None
    return _holders(inodes, among) if inodes else set()


def command_line(pid: int) -> str | None:
    """A live process's command line (None: gone, or not ours to read)."""
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return " ".join(a.decode(errors="replace") for a in argv if a) or None


def port_holders(host: str, port: int) -> list[tuple[int, str]]:
    """(pid, command line) of each process listening on ``host:port`` (empty: none found)."""
    inodes = (_socket_inodes((host, port), None) or set()) | (
        _socket_inodes(("0.0.0.0", port), None) or set()
    )
    if not inodes:
        return []
    return [(pid, command_line(pid) or "?") for pid in sorted(_holders(inodes, _pids()))]
