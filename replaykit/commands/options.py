"""What the commands share: the common options (``--store``, ``--config``, ``--json``,
``--keep-going``), opening the store, printing one JSON document.

Which store a command reads: ``--store``, else the store of ``--config CFG``, else
``$REPLAYKIT_STORE``, else ``./cassettes``. Every store opened is remembered with how
it was chosen (``looked_in``), so an id that is not found says where it was looked for
(``shell.run`` appends it to the error line)."""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

if TYPE_CHECKING:
    from replaykit.cassette.backend import StoreBackend
    from replaykit.episodes.task_source import TaskSources


StoreOpt = typer.Option(
    None,
    "--store",
    help="Store: a folder, sqlite:PATH or postgresql://… (default: $REPLAYKIT_STORE or ./cassettes).",
)
JsonOpt = typer.Option(False, "--json", help="Print one JSON document for scripts.")
WideOpt = typer.Option(
    False,
    "--wide",
    help="Every column and one-line legends, however wide (default: fit the terminal or $COLUMNS, 80 piped).",
)


def wide_layout(wide: bool) -> None:
    """``--wide``: tables keep every column, whatever the width (only the commands that take it
    may leave a column out, and say so)."""
    if wide:
        from replaykit.render.console import set_wide

        set_wide(True)


#: the default of ``--output-cap`` (``replaykit.report.transcript.OUTPUT_CAP``; a test keeps them equal)
OUTPUT_CAP = 256 * 1024
OutputCapOpt = typer.Option(
    OUTPUT_CAP,
    "--output-cap",
    min=1024,
    help="Show at most this many bytes of each output (message, stdout, stderr) in transcripts and diffs; the rest is counted.",
)
KeepGoingOpt = typer.Option(
    False,
    "--keep-going",
    help=(
        "On a model endpoint failure, or a task whose environment cannot be prepared (its image does not"
        " build), mark those episodes infra (not graded, re-recorded next run) and go on."
    ),
)
# Harbor's multipliers and resource overrides (`harbor run` names them so); envs/limits.py
TimeoutMultiplierOpt = typer.Option(
    None,
    "--timeout-multiplier",
    min=0.01,
    max=1000.0,
    help="Scale the agent, verifier and build timeouts of task.toml.",
)
AgentTimeoutMultiplierOpt = typer.Option(
    None,
    "--agent-timeout-multiplier",
    min=0.01,
    max=1000.0,
    help="Scale the agent timeout (wins over --timeout-multiplier).",
)
VerifierTimeoutMultiplierOpt = typer.Option(
    None,
    "--verifier-timeout-multiplier",
    min=0.01,
    max=1000.0,
    help="Scale the verifier timeout (wins over --timeout-multiplier).",
)
BuildTimeoutMultiplierOpt = typer.Option(
    None,
    "--build-timeout-multiplier",
    "--environment-build-timeout-multiplier",
    min=0.01,
    max=1000.0,
    help="Scale the image build timeout (wins over --timeout-multiplier).",
)
OverrideCpusOpt = typer.Option(
    None, "--override-cpus", min=0.01, max=1000.0, help="CPUs of the container, instead of task.toml's."
)
OverrideMemoryOpt = typer.Option(
    None, "--override-memory-mb", min=16, help="Memory (MB) of the container, instead of task.toml's."
)
OverrideStorageOpt = typer.Option(
    None, "--override-storage-mb", min=16, help="Storage (MB) of the container, instead of task.toml's."
)


#: the config key each command-line flag sets (an error in one names the flag, not the config file)
OVERRIDE_FLAGS: dict[str, str] = {
    "harness.agent": "--agent",
    "model.name": "--model",
    "model.reuse": "--reuse",
    "model.accept_engine_change": "--accept-engine-change",
    "executor": "--executor",
    "env.timeout_multiplier": "--timeout-multiplier",
    "env.agent_timeout_multiplier": "--agent-timeout-multiplier",
    "env.verifier_timeout_multiplier": "--verifier-timeout-multiplier",
    "env.build_timeout_multiplier": "--build-timeout-multiplier",
    "env.cpus": "--override-cpus",
    "env.memory_mb": "--override-memory-mb",
    "env.storage_mb": "--override-storage-mb",
}


def limit_overrides(
    timeout: float | None,
    agent: float | None,
    verifier: float | None,
    build: float | None,
    cpus: float | None,
    memory_mb: int | None,
    storage_mb: int | None,
) -> dict[str, object]:
    """The flags above as config overrides (``env.…``), the unset ones left out."""
    values = {
        "timeout_multiplier": timeout,
        "agent_timeout_multiplier": agent,
        "verifier_timeout_multiplier": verifier,
        "build_timeout_multiplier": build,
        "cpus": cpus,
        "memory_mb": memory_mb,
        "storage_mb": storage_mb,
    }
    return {f"env.{k}": v for k, v in values.items() if v is not None}


ConfigStoreOpt = typer.Option(
    None, "--config", help="Use this run config's store (its store: field), as run and train did."
)
TasksOpt = typer.Option(
    None,
    "--tasks",
    help="Where to find the run's task folders by id and content (a task, a folder of tasks or a glob;"
    " repeatable), after the store's own copy and --config's panel.",
)


class Reuse(StrEnum):
    """``--reuse``: serve a new episode a donor's answers while it repeats it (``model.reuse``)."""

    PREFIX = "prefix"
    NONE = "none"


ReuseOpt = typer.Option(
    None,
    "--reuse",
    help="prefix: serve each new episode the answers of one recorded under another harness SHA while its "
    "requests and observations repeat it; none: send every call. Default: model.reuse, else prefix on a "
    "deterministic engine (the built-in server, or a saved probe says so), none elsewhere.",
)


def model_overrides(reuse: Reuse | None, accept_engine_change: bool = False) -> dict[str, object]:
    """The config keys ``--reuse`` and ``--accept-engine-change`` set."""
    out: dict[str, object] = {}
    if reuse is not None:
        out["model.reuse"] = reuse.value
    if accept_engine_change:
        out["model.accept_engine_change"] = True
    return out


ExecutorOpt = typer.Option(
    None,
    "--executor",
    metavar="KIND[:K=V,...]",
    help="Where episodes run: an executor kind and its keys, e.g. local:workers=4, ray:address=auto,cpus=2 (validated as a config's executor section).",
)


def executor_override(executor: str | None) -> dict[str, object]:
    """``--executor`` as a config override (the whole ``executor`` section), checked first:
    one line naming the option when it is wrong."""
    if not executor:
        return {}
    from replaykit.execution.config import executor_values, parse_executor

    parse_executor(executor)
    return {"executor": executor_values(executor)}


AcceptEngineOpt = typer.Option(
    False,
    "--accept-engine-change",
    help="Reuse cassettes recorded under another engine identity (what the endpoint reports about itself).",
)


#: the stores this command opened, each with how it was chosen (for "not found" errors)
_looked_in: list[str] = []


def choose_store(store: Optional[str | Path], config: Optional[Path] = None) -> tuple[str, str]:
    """(location, how it was chosen): --store, --config's store, $REPLAYKIT_STORE, ./cassettes."""
    if store:
        return str(store), "--store"
    if config is not None:
        from replaykit.episodes.config import load_config

        return load_config(config).store_location, f"the store of --config {config}"
    if os.environ.get("REPLAYKIT_STORE"):
        return os.environ["REPLAYKIT_STORE"], "$REPLAYKIT_STORE"
    return "cassettes", "the default ./cassettes"


def open_store(
    store: Optional[str | Path], readonly: bool = False, config: Optional[Path] = None
) -> StoreBackend:
    """The store chosen by ``choose_store`` (a folder, ``sqlite:PATH`` or a backend URL such
    as ``postgresql://…``); ``readonly`` never creates nor writes it."""
    import atexit

    from replaykit.cassette.stores import open_store as open_location

    location, how = choose_store(store, config)
    _looked_in.append(f"{location} ({how})")
    st = open_location(location, readonly=readonly)
    atexit.register(st.close)
    return st


def forget_stores() -> None:
    _looked_in.clear()


def looked_in(choices: str | None = "--store, --config CFG or $REPLAYKIT_STORE") -> str:
    """Where this command looked for ids, and how to look elsewhere (``choices``: the command's
    own ways; None: not said, the message says it; "" before any store opened)."""
    if not _looked_in:
        return ""
    where = "; ".join(dict.fromkeys(_looked_in))
    return f"looked in {where}" + (f"; choose another with {choices}" if choices else "")


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def task_sources(store: StoreBackend, tasks: Optional[list[str]], config: Optional[Path]) -> TaskSources:
    """Where a command finds a run's task folders: the store's copy, ``--config``'s panel (resolved
    against that config's folder), ``--tasks`` (``episodes/task_source.py``)."""
    from replaykit.episodes.config import load_config
    from replaykit.episodes.task_source import TaskSources

    loaded = load_config(config) if config is not None else None
    panel = (loaded.panel.tasks, loaded.base_dir) if loaded is not None else None
    return TaskSources.of(store, tasks, panel)
