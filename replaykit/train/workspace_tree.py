"""The proposer's workspace as files: its digest, its read-only folder, its bounded rendering.

``workspace.py`` builds an epoch's files; this module knows nothing of a training, so the agent
backends (``openai_backend.py``, ``models/codex.py``) read a :class:`Workspace` without importing
the loop. ``tree_digest``: sha256 over the sorted paths and contents (the proposal key's part).
"""

from __future__ import annotations

import atexit
import fnmatch
import hashlib
import inspect
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from replaykit.core.records import JSON

#: what a task folder never shows the proposer, whatever ``proposer_visible`` says
HIDDEN_TASK_DIRS = ("tests", "solution")


def takes_workspace(fn: Callable[..., object]) -> bool:
    """Whether an estimator's ``edit`` (or a backend's ``propose``) takes a ``workspace``."""
    try:
        return "workspace" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def reads_workspace(estimator: object) -> bool:
    """Whether an estimator reads a workspace: its ``edit`` takes one and, an agentic estimator,
    its backend's ``propose`` does too (``openai``: a rendering in its request; ``codex``: a copy
    in its working folder)."""
    edit = getattr(estimator, "edit", None)
    if edit is None or not takes_workspace(edit):
        return False
    backend = getattr(estimator, "backend", None)
    return backend is None or takes_workspace(getattr(backend, "propose", edit))


@dataclass(frozen=True)
class Workspace:
    path: Path
    digest: str  # tree_digest of files
    files: Mapping[str, bytes]

    @property
    def short(self) -> str:
        return self.digest[:16]

    def manifest(self) -> list[list[str | int]]:
        """``[path, size, sha256[:16]]`` of each file, sorted (what ``audit --workspace`` lists)."""
        return [[p, len(d), hashlib.sha256(d).hexdigest()[:16]] for p, d in sorted(self.files.items())]


def tree_digest(files: Mapping[str, bytes]) -> str:
    """sha256 of the sorted paths and contents: the same files give the same digest anywhere."""
    h = hashlib.sha256()
    for path in sorted(files):
        data = files[path]
        h.update(f"{path}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def visible(path: str, globs: Sequence[str]) -> bool:
    """``path`` (``harness/...`` or ``tasks/T/...``) admitted by a glob, and never a task's tests or solution."""
    parts = path.split("/")
    if parts[0] == "tasks" and (len(parts) < 3 or parts[2] in HIDDEN_TASK_DIRS):
        return False
    return any(fnmatch.fnmatch(path, g) for g in globs)


def workspace_root(store: object) -> Path:
    """Where workspaces are written: the store's cache, or (a read-only or remote store) a temporary folder."""
    root = getattr(store, "root", None)
    if isinstance(root, Path) and not getattr(store, "readonly", False):
        return root / "cache" / "workspaces"
    global _TEMP
    if _TEMP is None:
        _TEMP = Path(tempfile.mkdtemp(prefix="replaykit-workspaces-"))
        atexit.register(remove, _TEMP)
    return _TEMP


_TEMP: Path | None = None


def remove(path: Path) -> None:
    """Remove a read-only folder (its modes made writable first)."""
    if not path.exists():
        return
    for dirpath, _, _ in os.walk(path):
        os.chmod(dirpath, 0o755)
    shutil.rmtree(path, ignore_errors=True)


def write_workspace(files: Mapping[str, bytes], root: Path) -> Workspace:
    """``files`` as a read-only folder ``root/<digest16>`` (written in a temporary sibling, then
    renamed: a reader never sees half of one; an existing one with that digest is reused)."""
    digest = tree_digest(files)
    target = root / digest[:16]
    if not (target / "README.md").exists():
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=root))
        for rel, data in files.items():
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            dest.chmod(0o444)
        for dirpath, _, _ in os.walk(tmp, topdown=False):
            os.chmod(dirpath, 0o555)
        try:
            os.replace(tmp, target)
        except OSError:  # another process wrote it first
            remove(tmp)
    return Workspace(target, digest, dict(files))


#: how a rendering starts (the reference proposer looks for it) and how many files it lists
WORKSPACE_HEADER = "Workspace files"
LISTED = 200
#: characters of one file a rendering quotes: its head and (a transcript's last commands) its tail
HEAD, TAIL = 1024, 3072


def _ends(text: str) -> str:
    if len(text) <= HEAD + TAIL:
        return text
    return f"{text[:HEAD]}\n… ({len(text) - HEAD - TAIL} characters not quoted)\n{text[-TAIL:]}"


def render_workspace(files: Mapping[str, bytes], cap: int = 24 * 1024) -> str:
    """A bounded text of a workspace for a proposer that cannot read folders (``openai``): its
    file list, then scores, the prior candidates and failed transcripts, each cut, up to ``cap`` bytes."""
    listing = [f"- {p} ({len(d)} bytes)" for p, d in sorted(files.items())][:LISTED]
    more = [f"- … {len(files) - LISTED} more"] if len(files) > LISTED else []
    head = "\n".join(
        [f"{WORKSPACE_HEADER} (read-only; the brief quotes the patch surface):", *listing, *more, ""]
    )
    order = sorted(
        (
            p
            for p in files
            if p.startswith(("scores.json", "candidates/", "episodes/failed/", "episodes/flipped/"))
        ),
        key=lambda p: (not p.startswith("scores"), not p.startswith("candidates/"), p),
    )
    parts, used = [head], len(head.encode())
    for path in order:
        body = _ends(files[path].decode("utf-8", "replace"))
        chunk = f"--- workspace: {path} ---\n{body}\n--- end workspace: {path} ---\n"
        if used + len(chunk.encode()) > cap:
            parts.append(
                f"(… {len(order) - order.index(path)} more workspace file(s) not quoted: the cap is {cap} bytes)\n"
            )
            break
        parts.append(chunk)
        used += len(chunk.encode())
    return "\n".join(parts)


def workspace_meta(workspace: Workspace) -> dict[str, JSON]:
    """What a proposal cassette keeps of its workspace: the digest, the listing (``audit
    --workspace``) and the task files (a replay where the task folders are not)."""
    tasks: dict[str, JSON] = {
        p: d.decode("utf-8", "replace") for p, d in sorted(workspace.files.items()) if p.startswith("tasks/")
    }
    files: list[JSON] = [list(row) for row in workspace.manifest()]
    return {"digest": workspace.digest, "files": files, "tasks": tasks}


def recorded_tasks(meta: Mapping[str, object]) -> dict[str, bytes] | None:
    """The task files a proposal's metadata recorded of its workspace (None: it recorded none)."""
    ws = meta.get("workspace")
    tasks = ws.get("tasks") if isinstance(ws, Mapping) else None
    if not isinstance(tasks, Mapping):
        return None
    return {str(p): str(t).encode("utf-8") for p, t in tasks.items()}
