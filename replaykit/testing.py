"""Helpers for tests (replaykit's own and users'): small configs in a temp folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from replaykit.config import RunConfig, load_config

REPO_ROOT = Path(__file__).resolve().parent.parent


#: The quickstart panel (configs/quickstart*.yaml): the first eight sample tasks.
QUICKSTART_TASKS: tuple[str, ...] = (
    "checksum-release", "count-error-lines", "csv-active-emails", "fix-config-port",
    "hello-file", "json-release-tag", "organize-files", "run-build-script",
)


def write_config(tmp: Path, overrides: dict[str, Any] | None = None, name: str = "config.yaml", base: str = "quickstart.yaml") -> Path:
    """A copy of ``configs/<base>`` whose store and harness repo live under ``tmp``
    (dotted keys override, e.g. ``{"env.snapshot": "full"}``)."""
    data: dict[str, Any] = yaml.safe_load((REPO_ROOT / "configs" / base).read_text())
    data["store"] = str(tmp / "store")
    data["harness"]["repo"] = str(tmp / "harness")
    data["panel"]["tasks"] = [str(REPO_ROOT / "envs" / t) for t in QUICKSTART_TASKS]
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    path = tmp / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def small_config(tmp: Path, tasks: list[str] | None = None, seeds: list[int] | None = None, **overrides: Any) -> RunConfig:
    """A config over a few sample tasks (by id) and seeds, for fast tests."""
    values: dict[str, Any] = dict(overrides)
    if tasks is not None:
        values["panel.tasks"] = [str(REPO_ROOT / "envs" / t) for t in tasks]
    if seeds is not None:
        values["panel.seeds"] = seeds
    return load_config(write_config(tmp, values))
