"""Where a recorded episode's task folder is found: by its id and content digest, never by the
path the recorder had nor the current folder.

In order: the store's own copy (a run keeps its task folders as trees, ``run_document.
task_trees``, and its bundles carry them: a receiver needs nothing but the bundle), the panel
of ``--config`` (resolved against that config's folder), then ``--tasks DIR`` (a task folder,
a folder of tasks or a glob). A folder of the right id whose content differs is never taken:
the line says it changed, and where.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from replaykit.cassette.backend import EpisodeStore
from replaykit.core.errors import TaskError
from replaykit.core.tree_digest import task_tree_name
from replaykit.envs.tasks import Task, load_panel, load_task


@dataclass(frozen=True)
class TaskSources:
    """The places a task is looked for (see the module doc)."""

    store: EpisodeStore
    panel: tuple[tuple[str, ...], Path] | None = None  # --config's panel patterns and its folder
    dirs: tuple[Path, ...] = field(default=())  # --tasks, as given (resolved by the caller)

    @classmethod
    def of(
        cls,
        store: EpisodeStore,
        tasks: Sequence[str | Path] | None = None,
        panel: tuple[Sequence[str], Path] | None = None,
    ) -> TaskSources:
        """The sources a command's ``--tasks`` (as typed) and a config's panel (its patterns and
        folder) name."""
        found = (tuple(panel[0]), panel[1]) if panel is not None else None
        return cls(store, found, tuple(Path(t).expanduser().absolute() for t in tasks or ()))

    def find(self, task_id: str, digest: str) -> Task:
        """The task of this id and content digest, or ``TaskError`` in one line saying where it
        looked and what to pass."""
        name = task_tree_name(task_id, digest)
        if self.store.has_tree(name):  # verified against its digest as it is read
            return load_task(self.store.materialise_tree(name) / task_id)
        seen: list[Task] = []
        for patterns, root in self._searches():
            try:
                found = [t for t in load_panel(list(patterns), root) if t.id == task_id]
            except TaskError:
                continue
            match = next((t for t in found if t.digest == digest), None)
            if match is not None:
                return match
            seen.extend(found)
        if seen:
            raise TaskError(
                f"task {task_id!r} at {seen[0].path} changed since it was recorded (digest "
                f"{seen[0].digest[:12]}, recorded {digest[:12]}); pass --tasks DIR holding the recorded version"
            )
        looked = ["the store"] + (["--config's panel"] if self.panel else []) + [str(d) for d in self.dirs]
        raise TaskError(
            f"task {task_id!r} (digest {digest[:12]}) is not in {', '.join(looked)}; pass --tasks DIR "
            "holding it (or --config CFG whose panel has it)"
        )

    def _searches(self) -> list[tuple[tuple[str, ...], Path]]:
        searches = [self.panel] if self.panel else []
        return searches + [((str(d),), d.parent) for d in self.dirs]
