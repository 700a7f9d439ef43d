"""``images build-base``, ``tasks check`` and ``certify``: the environments tasks run in —
base images, the oracle check of task folders, determinism certificates of a run."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import typer

from replaykit import render
from replaykit.commands.options import (
    AgentTimeoutMultiplierOpt,
    BuildTimeoutMultiplierOpt,
    ConfigStoreOpt,
    ExecutorOpt,
    JsonOpt,
    OverrideCpusOpt,
    OverrideMemoryOpt,
    OverrideStorageOpt,
    StoreOpt,
    TasksOpt,
    TimeoutMultiplierOpt,
    VerifierTimeoutMultiplierOpt,
    emit_json,
    limit_overrides,
    open_store,
    task_sources,
)


def images_build_base(
    tag: str = typer.Option("replaykit/base:bookworm", "--tag", help="Tag of the local base image."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the image exists."),
    flavor: Literal["debian", "python"] = typer.Option(
        "debian",
        "--flavor",
        help="debian: bash, coreutils, python3, pytest, tmux; python: + pip, venv, uv, an offline uvx (tag replaykit/base:bookworm-python).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Build a minimal Debian bookworm image (bash, coreutils, python3, tmux) with debootstrap; cached."""
    from replaykit.envs.docker.base_image import build_base_image

    if flavor == "python":
        from replaykit.envs.docker.flavours import PYTHON_IMAGE, build_python_image

        result = build_python_image(
            tag=PYTHON_IMAGE if tag == "replaykit/base:bookworm" else tag,
            force=force,
            progress=None if as_json else render.err,
        )
    else:
        result = build_base_image(tag=tag, force=force, progress=None if as_json else render.err)
    if as_json:
        emit_json(result)
    else:
        render.base_image(result)


def tasks_check(
    paths: list[str] = typer.Argument(..., help="Task folders, folders of tasks, or globs (e.g. 'envs/*')."),
    env: str = typer.Option(
        "docker",
        "--env",
        help="Environment kind to check the tasks in (docker, local, or one an installed package adds).",
    ),
    alias: Optional[list[str]] = typer.Option(
        None, "--alias", help="Image alias FROM=TO, e.g. ubuntu:24.04=replaykit/base:bookworm (repeatable)."
    ),
    config: Optional[Path] = typer.Option(
        None,
        "--config",
        help="Take the kind's env settings (image_aliases, …) and the limits from this run config.",
    ),
    timeout_multiplier: Optional[float] = TimeoutMultiplierOpt,
    agent_timeout_multiplier: Optional[float] = AgentTimeoutMultiplierOpt,
    verifier_timeout_multiplier: Optional[float] = VerifierTimeoutMultiplierOpt,
    build_timeout_multiplier: Optional[float] = BuildTimeoutMultiplierOpt,
    override_cpus: Optional[float] = OverrideCpusOpt,
    override_memory_mb: Optional[int] = OverrideMemoryOpt,
    override_storage_mb: Optional[int] = OverrideStorageOpt,
    network: Optional[str] = typer.Option(
        None,
        "--network",
        help="docker: networked tasks' policy, as run's env.network: frozen (default: through the recording proxy), live or none.",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Oracle check: the untouched environment scores 0 and solution/solve.sh scores 1."""
    from replaykit.envs.check import check_tasks
    from replaykit.envs.section import env_section

    section: dict[str, object] = {}
    if config:
        from replaykit.episodes.config import load_config

        loaded = load_config(config).env
        if loaded.kind == env:  # that config's settings for this kind (aliases, network, …)
            section.update(loaded.settings.model_dump(exclude_defaults=True))
        section.update(loaded.limits())
    if network is not None:
        if network not in ("frozen", "live", "none"):
            raise typer.BadParameter(f"{network!r} is not frozen, live or none", param_hint="--network")
        section["network"] = network
    flags = limit_overrides(
        timeout_multiplier,
        agent_timeout_multiplier,
        verifier_timeout_multiplier,
        build_timeout_multiplier,
        override_cpus,
        override_memory_mb,
        override_storage_mb,
    )
    section.update({k.removeprefix("env."): v for k, v in flags.items()})
    configured = section.get("image_aliases")
    aliases = {str(k): str(v) for k, v in configured.items()} if isinstance(configured, dict) else {}
    for item in alias or []:
        source, sep, target = item.partition("=")
        if not sep or not source or not target:
            raise typer.BadParameter(f"{item!r} is not FROM=TO", param_hint="--alias")
        aliases[source] = target
        section["image_aliases"] = aliases
    with render.progress(enabled=not as_json) as progress:
        report = check_tasks(paths, Path.cwd(), progress=progress, env=env_section(env, section))
    if as_json:
        emit_json(report)
    else:
        render.tasks_check(report)
    if not report["ok"]:
        raise typer.Exit(1)


def certify(
    run_id: str = typer.Argument(..., help="A run id from `replaykit run`."),
    tasks: Optional[list[str]] = TasksOpt,
    refresh: bool = typer.Option(False, "--refresh", help="Re-execute even where a certificate exists."),
    workers: Optional[int] = typer.Option(
        None, "--workers", min=1, max=1024, help="Re-execute tasks in N local processes."
    ),
    ray: Optional[str] = typer.Option(
        None, "--ray", help="Re-execute tasks as Ray tasks: auto | ray://host:10001 | local."
    ),
    executor: Optional[str] = ExecutorOpt,
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Re-execute a run's recorded actions and classify each task deterministic or forked."""
    from replaykit.episodes.certify import certify_run
    from replaykit.execution.select import cli_executor

    st = open_store(store, config=config)
    with render.progress(enabled=not as_json) as progress:
        report = certify_run(
            st,
            run_id,
            sources=task_sources(st, tasks, config),
            refresh=refresh,
            progress=progress,
            executor=cli_executor(workers, ray, executor),
        )
    if as_json:
        emit_json(report)
    else:
        render.certify_report(report)
    if not report["certified"]:
        raise typer.Exit(1)
