"""Harbor's ``[environment.healthcheck]``: wait until the environment is ready.

After the environment starts (and before the agent or the oracle acts), ``command``
runs in it (``bash -c``, in the workdir) until it exits 0. Failures during
``start_period_sec`` do not count (attempts every ``start_interval_sec``); after
that, attempts every ``interval_sec``, and ``retries`` consecutive failures make the
environment unhealthy. Each attempt is cut at ``timeout_sec``. The attempts are not
recorded: they happen before the episode. Docker-compose services' own healthchecks
are waited for by ``compose.py``.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from replaykit.core.errors import TaskError

#: Harbor's HealthcheckConfig defaults.
DEFAULTS: dict[str, float] = {
    "interval_sec": 5.0,
    "timeout_sec": 30.0,
    "start_period_sec": 0.0,
    "start_interval_sec": 5.0,
    "retries": 3,
}


class HealthcheckConfig(TypedDict):
    """A task's ``environment.healthcheck`` table, validated, its defaults filled in."""

    command: str
    interval_sec: float
    timeout_sec: float
    start_period_sec: float
    start_interval_sec: float
    retries: float


def healthcheck_config(task: Any) -> HealthcheckConfig | None:
    """The task's validated healthcheck table, or None."""
    env = task.config.get("environment")
    table = env.get("healthcheck") if isinstance(env, dict) else None
    if table is None:
        return None
    where = f"{task.path / 'task.toml'}"
    if (
        not isinstance(table, dict)
        or not isinstance(table.get("command"), str)
        or not table["command"].strip()
    ):
        raise TaskError(f"{where}: field 'environment.healthcheck.command' must be a non-empty string")
    numbers: dict[str, float] = {}
    for key, default in DEFAULTS.items():
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise TaskError(
                f"{where}: field 'environment.healthcheck.{key}' must be a number >= 0, got {value!r}"
            )
        numbers[key] = value
    return HealthcheckConfig(
        command=table["command"],
        interval_sec=numbers["interval_sec"],
        timeout_sec=numbers["timeout_sec"],
        start_period_sec=numbers["start_period_sec"],
        start_interval_sec=numbers["start_interval_sec"],
        retries=numbers["retries"],
    )


def wait_healthy(env: Any, task: Any) -> str | None:
    """Run the healthcheck until it passes; None when healthy, else why not."""
    config = healthcheck_config(task)
    if config is None:
        return None
    started = time.monotonic()
    failures = 0
    while True:
        obs = env.run(config["command"], timeout_sec=max(0.1, config["timeout_sec"]))
        if obs.exit_code == 0:
            return None
        said = (obs.stderr or obs.stdout).strip().splitlines()
        last = said[-1] if said else f"exit {obs.exit_code}"
        in_start = time.monotonic() - started < config["start_period_sec"]
        if not in_start:
            failures += 1
            if failures >= max(1, int(config["retries"])):
                return f"the environment healthcheck failed {failures} time(s) in a row (last: {last[:200]})"
        time.sleep(config["start_interval_sec"] if in_start else config["interval_sec"])
