"""Episode workspaces: one folder per episode key, one process at a time, cleaned after kills."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Iterator

from replaykit.cassette.keys import CassetteKey
from replaykit.core.stale import clean_dead_scratch, clean_free_locks, locked_file
from replaykit.envs.base import episode_workspace


def workspace_path(key: CassetteKey) -> Path:
    """Derived from the key, so paths that show up in outputs repeat across runs."""
    return episode_workspace(key.id)


@contextlib.contextmanager
def episode_lock(key: CassetteKey) -> Iterator[None]:
    """One process at a time per episode key (its workspace path is shared); whatever a
    killed run left at that path, inside replaykit's own folder, is cleared under the lock."""
    path = workspace_path(key)
    with locked_file(path.parent / f".{path.name}.lock"):  # unlinked when released: no lock files pile up
        shutil.rmtree(path, ignore_errors=True)
        yield


def clean_workspaces() -> None:
    """Clear what killed runs left among episode workspaces: half-removed folders of dead
    processes, and lock files nobody holds."""
    parent = episode_workspace("0" * 16).parent
    clean_dead_scratch(parent)
    clean_free_locks(parent)
