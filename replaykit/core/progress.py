"""The progress callback every long operation takes: ``progress(event, data)``, typed.

Library functions report ``("plan", {"total": n})``, then one event per unit done;
the CLI turns them into a rich progress bar (``render.progress_bar``). None: silent.

Events (``ProgressEvent``) and what their ``data`` holds (``ProgressData``):

- ``outer`` {total, label}: an outer bar starts (the epochs of a training, the cells
  of a compare); ``outer_step`` {label} and ``epoch`` {epoch} advance it;
- ``plan`` {total, missing?, label?}: the inner bar (re)starts; ``episode`` {task_id,
  seed, grade? | identical?, model_calls?, reused_events?, label?}, ``task`` {task_id} and ``cell`` {epoch} advance it;
- ``note`` {message}: a line for the user.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypedDict

ProgressEvent = Literal["outer", "outer_step", "epoch", "plan", "episode", "task", "cell", "note"]


class ProgressData(TypedDict, total=False):
    total: int | None
    missing: int
    label: str
    epoch: int
    task_id: str
    seed: int | str
    grade: object  # the episode's Grade (envs.base), when it was recorded
    identical: bool  # a replayed episode matched its recording
    model_calls: int  # a recorded episode's requests that reached the endpoint
    reused_events: int  # its events served from a donor cassette instead
    message: str


Progress = Callable[[ProgressEvent, ProgressData], None]
