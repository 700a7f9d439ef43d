"""A folder's content digest, from its files however they are held (a folder on disk, a tree
of blobs in the store): sorted relative paths, each file's kind (``X`` executable, ``F``
plain, ``L`` a symbolic link and its target) and bytes, never times. A task's digest
(``envs.tasks.task_digest``) is this over its folder; a task stored as a tree in the store is
checked against it on every read and at the bundle border."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

EXECUTABLE, PLAIN, LINK = "X", "F", "L"
#: the path prefix a task tree's files are stored under (``task-<digest>-<id>``: ``<id>/…``)
TASK_TREE = "task-"


def entries_digest(entries: Iterable[tuple[str, str, bytes]]) -> str:
    """sha256 over ``(relative path, kind, bytes)`` entries, in path order."""
    h = hashlib.sha256()
    for rel, kind, data in sorted(entries):
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        if kind == LINK:
            h.update(b"L\0" + data + b"\0")
            continue
        h.update(b"X\0" if kind == EXECUTABLE else b"F\0")
        h.update(str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def task_tree_name(task_id: str, digest: str) -> str:
    """The store tree holding a task folder of this id and content digest."""
    return f"{TASK_TREE}{digest}-{task_id}"


def task_tree_parts(name: str) -> tuple[str, str] | None:
    """(task id, content digest) a task tree's name says, or None for another tree."""
    if not name.startswith(TASK_TREE):
        return None
    digest, _, task_id = name[len(TASK_TREE) :].partition("-")
    return (task_id, digest) if len(digest) == 64 and task_id else None


def task_tree_problem(name: str, files: Mapping[str, tuple[int, bytes]]) -> str | None:
    """What is wrong with a task tree's files (None: every file under ``<id>/`` and their digest
    the one its name says)."""
    parts = task_tree_parts(name)
    if parts is None:
        return None
    task_id, digest = parts
    prefix = task_id + "/"
    if any(not path.startswith(prefix) for path in files):
        return f"task tree {name[:40]}: a file outside its task folder {task_id!r}"
    found = entries_digest(
        (path[len(prefix) :], EXECUTABLE if mode & 0o111 else PLAIN, data)
        for path, (mode, data) in files.items()
    )
    if found != digest:
        return f"task {task_id}'s folder does not match its digest {digest[:12]} (its files hash to {found[:12]})"
    return None
