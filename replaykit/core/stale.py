"""What a killed process leaves behind, and how the next run clears it.

Scratch paths that a process owns carry its pid (``<name>.tmp-<pid>-…``,
``.<name>.removing-<pid>``, ``replaykit-wt-<pid>-…``, and in ``$TMPDIR``
``replaykit-<kind>-<pid>-…``: :func:`owned_temp_dir`), so a later process can tell
a dead owner's leftovers from a live neighbour's work (:func:`clean_dead_temp` sweeps
``$TMPDIR``: a ``kill -9`` during an import or a pull leaves its spool there). Lock files are taken with
:func:`locked_file`, which unlinks them when done and checks, after locking, that
the path still names the locked file — so a cleaner may remove any lock file it
can lock itself, without two processes ever holding "the" lock at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import git

WORKTREE_PREFIX = "replaykit-wt-"
_PID_RE = re.compile(r"(?:\.tmp-|\.removing-|^" + re.escape(WORKTREE_PREFIX) + r")(\d+)")
#: ``$TMPDIR/replaykit-<kind>-<pid>-<random>`` (:func:`owned_temp_dir`); a name without a pid
#: (made by ``mkdtemp`` alone: its random part holds no hyphen) never matches
_TEMP_RE = re.compile(r"^replaykit-([a-z][a-z-]*?)-(\d+)-[a-z0-9_]+$")


def pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def owner_dead(name: str) -> bool:
    """Whether a scratch path's name carries the pid of a process that is gone."""
    match = _PID_RE.search(name)
    return match is not None and not pid_alive(int(match.group(1)))


def owned_temp_dir(kind: str) -> Path:
    """A fresh folder in ``$TMPDIR`` named ``replaykit-<kind>-<pid>-…``: removed by its owner
    when done, and by :func:`clean_dead_temp` at a later start when the owner was killed first."""
    return Path(tempfile.mkdtemp(prefix=f"replaykit-{kind}-{os.getpid()}-"))


def clean_dead_temp(kinds: tuple[str, ...]) -> list[Path]:
    """Remove the :func:`owned_temp_dir` folders of ``kinds`` whose process is gone."""
    removed: list[Path] = []
    try:
        children = list(Path(tempfile.gettempdir()).iterdir())
    except OSError:
        return removed
    for child in children:
        match = _TEMP_RE.match(child.name)
        if match is None or match.group(1) not in kinds:
            continue
        if not pid_alive(int(match.group(2))) and child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
            removed.append(child)
    return removed


def scratch_dir(parent: Path, name: str) -> Path:
    """A fresh folder next to ``parent/name`` that only this process uses."""
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{name}.tmp-{os.getpid()}-", dir=parent))


def clean_dead_scratch(parent: Path, name: str | None = None) -> list[Path]:
    """Remove ``<name>.tmp-<pid>-*`` and ``.<name>.removing-<pid>`` left in ``parent`` by dead processes."""
    removed: list[Path] = []
    if not parent.is_dir():
        return removed
    for child in parent.iterdir():
        if not child.name.startswith(f".{name}." if name else "."):
            continue
        if (".tmp-" in child.name or ".removing-" in child.name) and owner_dead(child.name):
            shutil.rmtree(child, ignore_errors=True)
            removed.append(child)
    return removed


@contextlib.contextmanager
def locked_file(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed); the file is unlinked on release."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+")  # held for the duration of the lock
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        handle.close()  # someone unlinked it between our open and our lock: take the new one
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        handle.close()


def clean_free_locks(parent: Path) -> list[Path]:
    """Unlink ``.*.lock`` files in ``parent`` that nobody holds (older versions left one per episode)."""
    removed: list[Path] = []
    if not parent.is_dir():
        return removed
    for child in parent.glob(".*.lock"):
        try:
            handle = open(child, "a+")
        except OSError:
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()  # held by a live process
            continue
        try:
            if os.stat(child).st_ino == os.fstat(handle.fileno()).st_ino:
                os.unlink(child)
                removed.append(child)
        except FileNotFoundError:
            pass
        finally:
            handle.close()
    return removed


def clean_stale_worktrees(repo: git.Repo) -> list[str]:
    """Remove git worktrees that replaykit registered for a process that is gone (a killed training)."""
    removed: list[str] = []
    try:
        listing = repo.git.worktree("list", "--porcelain")
    except git.GitCommandError:
        return removed
    for line in listing.splitlines():
        if not line.startswith("worktree "):
            continue
        path = Path(line[len("worktree ") :])
        if path.name.startswith(WORKTREE_PREFIX) and owner_dead(path.name):
            with contextlib.suppress(git.GitCommandError):
                repo.git.worktree("remove", "--force", str(path))
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    with contextlib.suppress(git.GitCommandError):
        repo.git.worktree("prune")
    return removed
