"""Harbor's timeout multipliers and resource overrides, applied to a loaded task.

A config's ``env`` section (or ``run``/``tasks check`` flags: ``--timeout-multiplier``,
``--agent-timeout-multiplier``, ``--verifier-timeout-multiplier``,
``--build-timeout-multiplier``, ``--override-cpus``, ``--override-memory-mb``,
``--override-storage-mb``, as ``harbor run`` names them) may scale task.toml's timeouts and
replace its ``cpus``, ``memory_mb`` and ``storage_mb``. :func:`with_limits` returns the task
as every kind then runs it: the same folder and digest (the task is the same task), its
``config`` (and each step's timeouts) changed. The values enter the config digest, so a
cassette recorded under other limits is never reused (``episodes/config.py``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping

from replaykit.envs.tasks import Task

#: the ``env`` keys this module reads (all optional; shared by every kind): ``KEYS``
TIMEOUTS = ("agent", "verifier", "build")
RESOURCES = ("cpus", "memory_mb", "storage_mb")


KEYS = ("timeout_multiplier", *(f"{k}_timeout_multiplier" for k in TIMEOUTS), *RESOURCES)


def limits_of(env: Mapping[str, object]) -> dict[str, float]:
    """The limits an ``env`` table sets (unset and ``None`` keys left out): ``KEYS`` → value."""
    found: dict[str, float] = {}
    for key in KEYS:
        value = env.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found[key] = value
    return found


def factor(limits: Mapping[str, float], which: str) -> float:
    """The multiplier of the ``agent``, ``verifier`` or ``build`` timeout."""
    return float(limits.get(f"{which}_timeout_multiplier", limits.get("timeout_multiplier", 1.0)))


def with_limits(task: Task, env: Mapping[str, object]) -> Task:
    """``task`` with the ``env`` table's multipliers and overrides applied (itself when none)."""
    limits = limits_of(env)
    factors = {which: factor(limits, which) for which in TIMEOUTS}
    resources = {k: limits[k] for k in RESOURCES if k in limits}
    if all(f == 1.0 for f in factors.values()) and not resources:
        return task
    config = copy.deepcopy(task.config)
    for section, key, value in (
        ("agent", "timeout_sec", task.agent_timeout_sec * factors["agent"]),
        ("verifier", "timeout_sec", task.verifier_timeout_sec * factors["verifier"]),
        ("environment", "build_timeout_sec", task.build_timeout_sec * factors["build"]),
    ):
        table = config.setdefault(section, {})
        assert isinstance(table, dict)
        table[key] = value
    environment = config["environment"]
    assert isinstance(environment, dict)
    if "memory_mb" in resources:
        environment.pop("memory", None)  # Harbor's string form would stand beside it
    environment.update(resources)

    def scaled(seconds: float | None, which: str) -> float | None:
        return None if seconds is None else seconds * factors[which]

    steps = tuple(
        dataclasses.replace(
            step,
            agent_timeout_sec=scaled(step.agent_timeout_sec, "agent"),
            verifier_timeout_sec=scaled(step.verifier_timeout_sec, "verifier"),
        )
        for step in task.steps
    )
    return dataclasses.replace(task, config=config, steps=steps)
