"""The paths a config references, checked when it is loaded (before anything is created):
each panel pattern matches a task folder; the harness repo is a folder, or can be made
from a known template; a store folder is a folder. Each failure is a line of the config."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from replaykit.core.errors import ConfigError, TaskError

#: the harness templates a config's ``harness.template`` names (``replaykit init --template``)
TEMPLATES = Path(__file__).parents[1] / "templates"


def known_templates() -> list[str]:
    return sorted(p.name for p in TEMPLATES.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


@dataclass(frozen=True)
class Referenced:
    """What a config references on disk, resolved against its folder."""

    tasks: list[str]  # panel patterns, relative to ``base_dir``
    base_dir: Path
    repo: Path
    template: str | Path | None  # a named agent's template is a folder
    store: Path | None  # None: a backend URL


Fail = Callable[[tuple[str | int, ...], str], ConfigError]


def check_paths(refs: Referenced, fail: Fail) -> None:
    """Every path the config references, before anything is created: each panel pattern
    matches a task folder; the harness repo is a folder, or can be made from a template;
    ``fail(field, message)`` is the config's line for a field."""
    from replaykit.envs.tasks import panel_folders

    for i, pattern in enumerate(refs.tasks):
        try:
            panel_folders([pattern], refs.base_dir)
        except TaskError as exc:
            raise fail(("panel", "tasks", i), str(exc)) from None
    repo = refs.repo
    if repo.exists() and not repo.is_dir():
        raise fail(("harness", "repo"), f"{repo} is not a folder; name the harness's git repository")
    if not repo.exists():
        if refs.template is None:
            raise fail(
                ("harness", "repo"),
                f"{repo} does not exist and harness.template is null; name an existing git "
                "repository, or a template to create it from (e.g. quickstart)",
            )
        if isinstance(refs.template, str) and refs.template not in known_templates():
            raise fail(
                ("harness", "template"),
                f"unknown template {refs.template!r}; known: {', '.join(known_templates())}",
            )
    if refs.store is not None and refs.store.exists() and not refs.store.is_dir():
        raise fail(("store",), f"{refs.store} is not a folder; name the store's folder (or a backend URL)")


def task_folders(patterns: list[str], base_dir: Path) -> list[Path]:
    """The task folders panel ``patterns`` name (relative to ``base_dir``), not loaded; a pattern
    matching none is a ``TaskError`` (for the layers above: ``train.panels``)."""
    from replaykit.envs.tasks import panel_folders

    return panel_folders(patterns, base_dir)


def first_tasks(patterns: list[str], base_dir: Path, n: int) -> list[Path]:
    """The folders of the first ``n`` tasks the patterns name, by task id (a panel's order)."""
    from replaykit.envs.tasks import load_panel

    return [task.path for task in load_panel(patterns, base_dir)[:n]]
