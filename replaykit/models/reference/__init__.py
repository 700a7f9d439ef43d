"""The reference model server: a documented, deterministic OpenAI-compatible simulator.

See ``README.md`` in this folder. Importing this package starts nothing.
"""

from __future__ import annotations

from replaykit.models.reference.server import ReferenceServer, build_models, serve_forever
from replaykit.models.reference.simulator import SKILLS, Skill, Task, TaskModel, default_task_dirs, load_tasks

__all__ = [
    "SKILLS",
    "ReferenceServer",
    "Skill",
    "Task",
    "TaskModel",
    "build_models",
    "default_task_dirs",
    "load_tasks",
    "serve_forever",
]
