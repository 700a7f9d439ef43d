"""Helpers for tests (replaykit's own and users'): small configs in a temp folder.

The configs and sample tasks come from a *project* folder (one holding ``configs/``
and ``envs/``, such as a replaykit checkout): ``root=`` when given, else
``$REPLAYKIT_PROJECT``, else the nearest such folder at or above the working
directory. Nothing here reads the installed package's location.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from replaykit.core.errors import ConfigError
from replaykit.core.run_doc import EpisodeSummary, ModelRef, RunDoc
from replaykit.episodes.config import RunConfig, apply_overrides, load_config

#: The quickstart panel (configs/quickstart*.yaml): the first eight sample tasks.
QUICKSTART_TASKS: tuple[str, ...] = (
    "checksum-release",
    "count-error-lines",
    "csv-active-emails",
    "fix-config-port",
    "hello-file",
    "json-release-tag",
    "organize-files",
    "run-build-script",
)


def project_root(start: Path | None = None) -> Path:
    """The project folder holding ``configs/`` and ``envs/`` (see the module docstring)."""
    explicit = os.environ.get("REPLAYKIT_PROJECT")
    if explicit:
        return Path(explicit).resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "configs").is_dir() and (folder / "envs").is_dir():
            return folder
    raise ConfigError(
        f"no project folder (with configs/ and envs/) at or above {here}; set REPLAYKIT_PROJECT or pass root="
    )


def __getattr__(name: str) -> Any:
    if name == "REPO_ROOT":  # the project folder, resolved on use (no work at import)
        return project_root()
    raise AttributeError(f"module 'replaykit.testing' has no attribute {name!r}")


def write_config(
    tmp: Path,
    overrides: Mapping[str, object] | None = None,
    name: str = "config.yaml",
    base: str = "quickstart.yaml",
    root: Path | None = None,
) -> Path:
    """A copy of ``configs/<base>`` whose store and harness repo live under ``tmp``
    (dotted keys override, e.g. ``{"env.snapshot": "full"}``)."""
    root = Path(root) if root is not None else project_root()
    data = yaml.safe_load((root / "configs" / base).read_text())
    if not isinstance(data, dict):
        raise ConfigError(f"{root / 'configs' / base} does not hold a mapping; give a config file as base")
    here = {
        "store": str(tmp / "store"),
        "harness.repo": str(tmp / "harness"),
        "panel.tasks": [str(root / "envs" / t) for t in QUICKSTART_TASKS],
    }
    apply_overrides(data, {**here, **(overrides or {})})
    path = tmp / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def small_config(
    tmp: Path, tasks: list[str] | None = None, seeds: list[int] | None = None, **overrides: Any
) -> RunConfig:
    """A config over a few sample tasks (by id) and seeds, for fast tests."""
    values: dict[str, object] = dict(overrides)
    if tasks is not None:
        values["panel.tasks"] = [str(project_root() / "envs" / t) for t in tasks]
    if seeds is not None:
        values["panel.seeds"] = seeds
    return load_config(write_config(tmp, values))


def run_doc(episodes: Sequence[Mapping[str, object]], run_id: str = "run") -> RunDoc:
    """A run record holding only ``episodes`` (rows as stored: task_id, seed, passed, …),
    for criteria and optimizers under test."""
    return RunDoc(
        run_id=run_id,
        name="",
        harness_sha=run_id,
        harness_repo="",
        model=ModelRef(name="", endpoint=""),
        config_digest="",
        cassettes=[],
        episodes=[EpisodeSummary.model_validate(e) for e in episodes],
    )
