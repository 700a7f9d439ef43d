"""Task folders in the Harbor layout: load one task, or a panel of them.

A task folder holds ``task.toml``, ``instruction.md``, ``environment/`` (Dockerfile and
starting ``files/``), ``tests/test.sh`` (the verifier) and ``solution/solve.sh``
(optional oracle). The folder name is the task id. The digest covers every file in
the folder, so a task's identity changes whenever any of its bytes change.
"""

from __future__ import annotations

import glob
import hashlib
import os
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replaykit.core.errors import TaskError
from replaykit.core.files import CHUNK
from replaykit.core.records import JSON
from replaykit.core.tree_digest import EXECUTABLE, PLAIN, entries_digest
from replaykit.envs import features, tb1
from replaykit.envs.steps import Step, load_steps
from replaykit.envs.task_schema import size_mb, validate_config

#: Harbor's defaults for fields a task.toml may leave out.
DEFAULT_AGENT_TIMEOUT_SEC = 600.0
DEFAULT_VERIFIER_TIMEOUT_SEC = 600.0
DEFAULT_BUILD_TIMEOUT_SEC = 600.0
DEFAULT_CPUS = 1
DEFAULT_MEMORY_MB = 2048
DEFAULT_STORAGE_MB = 10240
DEFAULT_WORKDIR = "/app"


@dataclass(frozen=True)
class Task:
    """One loaded task folder. ``config`` is the parsed task.toml (not part of the hash)."""

    id: str
    path: Path
    instruction: str
    config: dict[str, object] = field(hash=False)
    digest: str
    steps: tuple[Step, ...] = field(default=(), hash=False)  # Harbor's [[steps]]; () for one step

    def _get(self, section: str, key: str, default: Any) -> Any:
        table = self.config.get(section)
        if isinstance(table, dict) and key in table:
            return table[key]
        return default

    @property
    def metadata(self) -> dict[str, JSON]:
        table = self.config.get("metadata")
        return dict(table) if isinstance(table, dict) else {}

    @property
    def agent_timeout_sec(self) -> float:
        return float(self._get("agent", "timeout_sec", DEFAULT_AGENT_TIMEOUT_SEC))

    @property
    def verifier_timeout_sec(self) -> float:
        return float(self._get("verifier", "timeout_sec", DEFAULT_VERIFIER_TIMEOUT_SEC))

    @property
    def build_timeout_sec(self) -> float:
        return float(self._get("environment", "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_SEC))

    @property
    def cpus(self) -> float:
        value = self._get("environment", "cpus", DEFAULT_CPUS)  # an override may be fractional
        return value if isinstance(value, float) and not value.is_integer() else int(value)

    @property
    def memory_mb(self) -> int:
        memory = self._get("environment", "memory", None)  # Harbor's string form, e.g. "2G"
        fallback = size_mb(memory) if isinstance(memory, str) else None
        return int(self._get("environment", "memory_mb", fallback or DEFAULT_MEMORY_MB))

    @property
    def storage_mb(self) -> int:
        return int(self._get("environment", "storage_mb", DEFAULT_STORAGE_MB))

    @property
    def workdir(self) -> str:
        return str(self._get("environment", "workdir", DEFAULT_WORKDIR))

    @property
    def network_mode(self) -> str:
        """Harbor's network policy: ``public`` (the default) or ``no-network`` (``features.network_mode``)."""
        return features.network_mode(self.config)

    @property
    def allow_internet(self) -> bool:
        """The episode's container may reach the network (Harbor's default: true)."""
        return self.network_mode != "no-network"

    @property
    def reward_strategy(self) -> str:
        """How a multi-step task's reward is derived: ``mean`` (default) or ``final``."""
        return str(self.config.get("multi_step_reward_strategy", "mean"))

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def files_dir(self) -> Path:
        """Starting files copied into the workdir (may not exist)."""
        return self.path / "environment" / "files"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def has_solution(self) -> bool:
        if self.steps:
            return all(step.solution_dir is not None for step in self.steps)
        return (self.solution_dir / "solve.sh").is_file()


_DIGESTS: dict[tuple[str, tuple[tuple[Any, ...], ...]], str] = {}


def _stat_signature(folder: Path) -> tuple[tuple[Any, ...], ...]:
    """Every entry's path, size, mode, inode and change times: any write changes it."""
    sig = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames + dirnames):
            st = os.lstat(os.path.join(dirpath, name))
            sig.append((dirpath, name, st.st_size, st.st_mode, st.st_ino, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(sig)


def task_digest(folder: Path) -> str:
    """sha256 over every file of a folder: sorted relative paths, executable bit, bytes.

    Symbolic links contribute their target text; directories only through their files.
    Modification times never enter the digest; they only let a process skip
    re-reading a folder whose entries are all unchanged since it last hashed it.
    """
    sig = _stat_signature(Path(folder))
    key = (str(Path(folder).resolve()), sig)
    digest = _DIGESTS.get(key)
    if digest is None:
        digest = _task_digest(Path(folder))
        # like git's "racy" rule: an entry changed within the last seconds could change
        # again within the same timestamp tick, so only settled folders are remembered
        newest = max((max(e[5], e[6]) for e in sig), default=0)
        if newest < time.time_ns() - 2_000_000_000:
            if len(_DIGESTS) > 4096:
                _DIGESTS.clear()
            _DIGESTS[key] = digest
    return digest


def _task_digest(folder: Path) -> str:
    """``core.tree_digest.entries_digest`` over the folder's files, read in chunks: a file's
    size never becomes memory."""
    entries: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = Path(dirpath) / name
            entries.append((full.relative_to(folder).as_posix(), full))
    h = hashlib.sha256()
    for rel, full in sorted(entries):
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        if full.is_symlink():
            h.update(b"L\0" + os.fsencode(os.readlink(full)) + b"\0")
            continue
        st = os.stat(full)
        h.update(b"X\0" if st.st_mode & 0o111 else b"F\0")
        h.update(str(st.st_size).encode() + b"\0")
        with open(full, "rb") as fh:  # in chunks: a file's size never becomes memory
            while block := fh.read(CHUNK):
                h.update(block)
    return h.hexdigest()


def task_files(task: Task) -> dict[str, tuple[int, bytes]] | None:
    """A task folder as a store tree's files, under ``<id>/`` (``core.tree_digest.task_tree_name``),
    so a bundle carries it and any machine finds it by its content digest; None for a folder
    holding a symbolic link (a tree keeps files only) or one that changed since it was loaded.
    (Its digest is ``core.tree_digest.entries_digest`` over the same entries: checked here.)"""
    entries: list[tuple[str, str, bytes]] = []
    for dirpath, dirnames, filenames in os.walk(task.path):
        dirnames.sort()
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = Path(dirpath) / name
            if full.is_symlink():
                return None
            kind = EXECUTABLE if os.stat(full).st_mode & 0o111 else PLAIN
            entries.append((full.relative_to(task.path).as_posix(), kind, full.read_bytes()))
    if entries_digest(entries) != task.digest:
        return None
    return {f"{task.id}/{rel}": (0o755 if kind == EXECUTABLE else 0o644, data) for rel, kind, data in entries}


_TASKS: dict[tuple[str, tuple[tuple[Any, ...], ...]], Task] = {}


def load_task(path: str | os.PathLike[str]) -> Task:
    """Load and validate one task folder; raises :class:`TaskError` naming file and field.

    A folder whose entries are all unchanged (and settled, see ``task_digest``) since
    this process last loaded it is not read again (a training loads its panel twice
    an epoch)."""
    folder = Path(path)
    if not folder.is_dir():
        return _load_task(folder)
    sig = _stat_signature(folder)
    key = (str(folder.resolve()), sig)
    task = _TASKS.get(key)
    if task is None:
        task = _load_task(folder)
        newest = max((max(e[5], e[6]) for e in sig), default=0)
        if newest < time.time_ns() - 2_000_000_000:
            if len(_TASKS) > 4096:
                _TASKS.clear()
            _TASKS[key] = task
    return task


def _load_task(path: str | os.PathLike[str]) -> Task:
    folder = Path(path)
    if not folder.is_dir():
        raise TaskError(f"{folder}: not a task folder (no such directory)")
    folder = folder.resolve()
    toml_path = folder / "task.toml"
    if tb1.is_tb1(folder):  # Terminal-Bench 1: loaded from the folder `harbor tasks migrate` would write
        return _load_task(tb1.convert(folder, task_digest(folder)))
    if not toml_path.is_file():
        raise TaskError(
            f"{toml_path}: missing; a task folder needs task.toml, instruction.md and tests/test.sh"
        )
    try:
        config = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TaskError(f"{toml_path}: invalid TOML: {exc}") from exc
    validate_config(config, toml_path)
    steps = load_steps(folder, config)
    instruction_path = folder / "instruction.md"
    if steps and not instruction_path.is_file():
        instruction = steps[0].instruction  # multi-step: the first step's instruction stands for the task
    elif not instruction_path.is_file():
        raise TaskError(f"{instruction_path}: missing; write the task's instruction there")
    else:
        try:
            instruction = instruction_path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise TaskError(f"{instruction_path}: not valid UTF-8: {exc}") from exc
    if not instruction.strip():
        raise TaskError(f"{instruction_path}: empty; write the task's instruction there")
    test_path = folder / "tests" / "test.sh"
    if not steps and not test_path.is_file():
        raise TaskError(f"{test_path}: missing; the verifier must write $LOGS_DIR/verifier/reward.txt")
    return Task(
        id=folder.name,
        path=folder,
        instruction=instruction,
        config=config,
        digest=task_digest(folder),
        steps=steps,
    )


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _task_like(folder: Path) -> bool:
    """A Harbor task folder, or a Terminal-Bench 1 one (``tb1.py``)."""
    return (folder / "task.toml").is_file() or tb1.is_tb1(folder)


def panel_folders(patterns: list[str], root: Path) -> list[Path]:
    """The task folders the paths/globs name (relative to ``root``), without loading them;
    a pattern that matches no task folder is a ``TaskError``."""
    if not patterns:
        raise TaskError("panel is empty: give at least one task path or glob")
    root = Path(root)
    found: list[Path] = []
    seen: set[Path] = set()
    for pattern in patterns:
        full = pattern if os.path.isabs(pattern) else str(root / pattern)
        if _is_glob(pattern):
            folders = [Path(m) for m in sorted(glob.glob(full)) if _task_like(Path(m))]
        elif (
            Path(full).is_dir()
            and not _task_like(Path(full))
            and any(_task_like(p) for p in Path(full).iterdir())
        ):
            folders = sorted(p for p in Path(full).iterdir() if _task_like(p))  # a folder of tasks
        else:
            folders = [Path(full)] if Path(full).is_dir() else []
        if not folders:
            raise TaskError(f"panel pattern {pattern!r} matches no task folder under {root}")
        for folder in folders:
            resolved = folder.resolve()
            if resolved not in seen:
                seen.add(resolved)
                found.append(folder)
    return found


def load_panel(patterns: list[str], root: Path, refused: dict[str, str] | None = None) -> list[Task]:
    """Load the tasks named by paths or globs (relative to ``root``), sorted by id.

    A glob keeps only the folders that hold a task.toml; a pattern that matches no task
    folder is an error, and so are two different folders with the same id. The same
    folder matched by several patterns is loaded once. A folder that does not load raises,
    unless ``refused`` collects it (``--keep-going``): its reason, by task id, and a stand-in
    task (its folder's name and digest, no configuration) whose episodes are infra.
    """
    by_id: dict[str, Task] = {}
    for folder in panel_folders(patterns, root):
        try:
            task = load_task(folder)
        except TaskError as exc:
            if refused is None or not folder.is_dir():
                raise
            task = Task(folder.name, folder.resolve(), "", {}, task_digest(folder))
            refused[task.id] = f"task {task.id} refused at load: {exc}"
        seen = by_id.get(task.id)
        if seen is not None and seen.path != task.path:
            raise TaskError(f"duplicate task id {task.id!r}: {seen.path} and {task.path}; rename one folder")
        by_id[task.id] = task
    return [by_id[task_id] for task_id in sorted(by_id)]
