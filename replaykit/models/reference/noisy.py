"""``reference-noisy``: the reference server's per-task noise mode.

A real model solves a task some of the time, and a harness change that does nothing still
changes its requests (a reworded prompt), so its samples change: two equally good harnesses
disagree on some task instances by chance alone. ``reference-noisy`` plays that, for measuring
how often a criterion accepts a change that does nothing (``benchmarks/null_trainings.py``):

- each task has its own **solve probability** ``p`` in [0.2, 0.8], a pure function of its id;
- each first attempt at one of its ``n`` steps is wrong with probability ``1 - p ** (1 / n)``,
  so an episode makes no mistake with probability ``p``;
- the draws are seeded by the request's seed, the task, the step and the attempt, as the skill
  table's models' are, and also by the **conversation's start** (every message up to the first
  ``user`` one): a harness whose prompt differs in any byte draws anew, one whose requests are
  the same draws the same (a comment in its code changes nothing);
- a failure nudged to retry (the ``retry`` convention, README.md) is right with probability
  0.35, at most 4 attempts: a harness that nudges solves more, which is a real improvement.

Response bytes stay a pure function of the request and the task folders.
"""

from __future__ import annotations

from collections.abc import Sequence

from replaykit.core.determinism import canonical_json, derive_seed, sha256_hex
from replaykit.models.reference.protocol import ChatRequest
from replaykit.models.reference.simulator import Skill, Task, TaskModel

NAME = "reference-noisy"
SKILL = Skill(mistake_rate=0.0, recover_rate=0.35)  # mistake_rate is per task (below)
LOW, HIGH = 0.2, 0.8


def solve_probability(task_id: str) -> float:
    """The task's chance of an episode with no mistake, in [LOW, HIGH], from its id alone."""
    return LOW + (HIGH - LOW) * derive_seed(NAME, "solve-probability", task_id) / 0x7FFFFFFF


class NoisyTaskModel(TaskModel):
    """A task model whose solve probability is the task's and whose draws follow the conversation."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        super().__init__(NAME, SKILL, tasks)

    def mistake_rate(self, task: Task) -> float:
        return 1.0 - float(solve_probability(task.task_id) ** (1 / max(len(task.steps), 1)))

    def salt(self, request: ChatRequest) -> str:
        start = []
        for message in request.messages:
            start.append(message)
            if message.get("role") == "user":
                break
        return sha256_hex(canonical_json(start))[:16]
