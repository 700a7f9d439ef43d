"""The paths a config references, checked when it is loaded (before anything is created):
each panel pattern matches a task folder; the harness repo is a folder, or can be made
from a known template; a store folder is a folder. Each failure is a line of the config."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from replaykit.cassette.stores import is_url, split_location
from replaykit.core.errors import TaskError

if TYPE_CHECKING:
    from replaykit.episodes.config import RunConfig

#: the harness templates a config's ``harness.template`` names (``replaykit init --template``)
TEMPLATES = Path(__file__).parents[1] / "templates"


def known_templates() -> list[str]:
    return sorted(p.name for p in TEMPLATES.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def check_paths(config: RunConfig) -> None:
    """Every path the config references, before anything is created: each panel pattern
    matches a task folder; the harness repo is a folder, or can be made from a template."""
    from replaykit.envs.tasks import panel_folders

    fail = config.field_error
    for i, pattern in enumerate(config.panel.tasks):
        try:
            panel_folders([pattern], config.base_dir)
        except TaskError as exc:
            raise fail(("panel", "tasks", i), str(exc)) from None
    repo = config.repo_path
    if repo.exists() and not repo.is_dir():
        raise fail(("harness", "repo"), f"{repo} is not a folder; name the harness's git repository")
    if not repo.exists():
        template = config.harness.template
        if template is None:
            raise fail(
                ("harness", "repo"),
                f"{repo} does not exist and harness.template is null; name an existing git "
                "repository, or a template to create it from (e.g. quickstart)",
            )
        if template not in known_templates():
            raise fail(
                ("harness", "template"),
                f"unknown template {template!r}; known: {', '.join(known_templates())}",
            )
    if not is_url(config.store):
        store = config.path(split_location(config.store)[1])
        if store.exists() and not store.is_dir():
            raise fail(("store",), f"{store} is not a folder; name the store's folder (or a backend URL)")
