"""``replaykit init DIR`` and ``replaykit tasks init NAME``: thin mirrors of ``replaykit.workspace.scaffold``."""

from __future__ import annotations

from pathlib import Path

import typer

from replaykit import render
from replaykit.commands.options import JsonOpt, emit_json


def init(
    folder: Path = typer.Argument(
        ..., help="New (or empty) folder for the harness repo, a sample task and replaykit.yaml."
    ),
    template: str = typer.Option(
        "quickstart",
        "--template",
        help="Harness template to start from (replaykit/templates/): quickstart (a bash tool), shell-text "
        "(a command in a fenced block), terminus (Terminus-2-like, a tmux session; its config runs in Docker).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Scaffold your own harness: a committed git repo with harness.py, a sample task and a config `replaykit run` accepts."""
    from replaykit.workspace.scaffold import init_project

    report = init_project(folder, template)
    if as_json:
        emit_json(report)
        return
    render.line(
        f"created {report['path']}: harness repo {report['harness']} ({report['harness_sha'][:10]}), task {report['task']}"
    )
    render.line(
        f"next: edit and commit {report['harness']}/harness.py, add tasks with `replaykit tasks init NAME --dir {folder}/tasks`, "
        f"then `replaykit run {report['config']}`"
    )
    render.line(
        "note: the config's model (base_url: builtin) is the built-in simulator: it plays each task's "
        "solution/solve.sh, so a task passes because its solution/ does; set model.base_url, model.name "
        "and model.api_key_env to measure a real model"
    )


def tasks_init(
    name: str = typer.Argument(..., help="Task id: lowercase letters, digits and dashes."),
    parent: Path = typer.Option(Path("envs"), "--dir", help="Folder to create the task in."),
    as_json: bool = JsonOpt,
) -> None:
    """Scaffold a Harbor-layout task (task.toml, instruction.md, environment/, tests/test.sh, solution/solve.sh)."""
    from replaykit.workspace.scaffold import init_task

    report = init_task(name, parent)
    if as_json:
        emit_json(report)
        return
    render.line(
        f"created task {report['path']}; edit instruction.md, tests/test.sh and solution/solve.sh, "
        f"then `replaykit tasks check {report['path']} --env local`"
    )
