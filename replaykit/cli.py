"""The ``replaykit`` command: each command parses, calls one library function, renders.

Errors are mapped to one line in one place, ``replaykit.commands.shell.run``:
library errors (``ReplaykitError``) exit 1, usage errors exit 2, Ctrl-C exits 130.
Commands that live elsewhere register here with one line each.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator, Literal, Optional

import typer

from replaykit import render
from replaykit.train import audit_cmd
from replaykit.errors import ReplaykitError

CONTEXT = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(
    no_args_is_help=True, context_settings=CONTEXT, help="Train agent harnesses; record and replay every run."
)
cassettes_app = typer.Typer(no_args_is_help=True, help="Inspect the cassette store.")
serve_app = typer.Typer(no_args_is_help=True, help="Run servers.")
images_app = typer.Typer(no_args_is_help=True, help="Docker images for tasks (no registry needed).")
tasks_app = typer.Typer(no_args_is_help=True, help="Check and create task folders (Harbor format).")
app.add_typer(cassettes_app, name="cassettes")
app.add_typer(serve_app, name="serve")
app.add_typer(images_app, name="images")
app.add_typer(tasks_app, name="tasks")

RecordMode = Literal["once", "new_episodes", "none", "all"]


def _version(value: bool) -> None:
    if value:
        from replaykit.versions import tool_versions

        sys.stdout.write(f"replaykit {tool_versions()['replaykit']}\n")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", "-V", is_eager=True, callback=_version, help="Print the version and exit."
    ),
) -> None:
    """Train agent harnesses; record and replay every run."""


StoreOpt = typer.Option(None, "--store", help="Store folder (default: $REPLAYKIT_STORE or ./cassettes).")
JsonOpt = typer.Option(False, "--json", help="Print one JSON document for scripts.")
KeepGoingOpt = typer.Option(
    False,
    "--keep-going",
    help="On a model endpoint failure, mark the episode infra (not graded, re-recorded next run) and go on.",
)


def open_store(store: Optional[Path], readonly: bool = False) -> Any:
    """The store at --store / $REPLAYKIT_STORE / ./cassettes; ``readonly`` never creates nor writes it."""
    import atexit

    from replaykit.cassette.store import Store

    st = Store(store or Path(os.environ.get("REPLAYKIT_STORE", "cassettes")), readonly=readonly)
    atexit.register(st.close)
    return st


@contextlib.contextmanager
def port_in_use_error(host: str, port: int) -> Iterator[None]:
    """A busy port is a one-line error naming it, not an OSError traceback."""
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise ReplaykitError(
            f"cannot listen on {host}:{port}: address already in use; choose another --port (0 picks a free one)"
        ) from exc


def with_errors(store: Any, doc: dict[str, Any]) -> dict[str, Any]:
    """Each failed episode whose harness raised gets ``error``: the exception type (from its cassette)."""
    from replaykit.views import show_cassette

    for episode in doc["episodes"]:
        if not episode["passed"] and not episode["infra_failure"]:
            events = show_cassette(store, episode["cassette_id"])["events"]
            errors = [e["message"] for e in events if e["kind"] == "error"]
            if errors:
                episode["error"] = errors[0].split(":", 1)[0]
    return doc


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


@app.command()
def run(
    config: Path = typer.Argument(..., help="YAML run config, e.g. configs/quickstart.yaml"),
    record_mode: RecordMode = typer.Option(
        "once",
        "--record-mode",
        help="once: reuse stored episodes, record the missing; none: replay only; all: re-record.",
    ),
    harness: Optional[str] = typer.Option(
        None, "--harness", help="Harness ref to measure (default: baseline branch HEAD)."
    ),
    model: Optional[str] = typer.Option(None, "--model", help="Override model.name from the config."),
    keep_going: bool = KeepGoingOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Measure the harness on the panel, recording (or reusing) one cassette per episode."""
    from replaykit.config import load_config
    from replaykit.run import measure

    cfg = load_config(config, {"model.name": model} if model else None)
    with render.progress(enabled=not as_json) as progress:
        result = measure(
            cfg, record_mode=record_mode, harness_ref=harness, progress=progress, keep_going=keep_going
        )
    doc = with_errors(open_store(cfg.store_path), result.to_json())
    if as_json:
        emit_json(doc)
    else:
        render.run_table(doc)


@app.command()
def replay(
    run_id: str = typer.Argument(..., help="A run id (or a training id) from `replaykit run`/`train`."),
    harness: Optional[str] = typer.Option(
        None, "--harness", help="Replay the recorded responses against another harness ref."
    ),
    harness_repo: Optional[Path] = typer.Option(
        None, "--harness-repo", help="Harness repo for --harness (default: the run's)."
    ),
    workers: Optional[int] = typer.Option(None, "--workers", help="Replay episodes in N local processes."),
    ray: Optional[str] = typer.Option(
        None, "--ray", help="Replay episodes as Ray tasks: auto | ray://host:10001 | local."
    ),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Replay a run or a whole training offline (no network, no environment) and compare."""
    from replaykit.executor import cli_executor
    from replaykit.run import replay_run

    st = open_store(store, readonly=True)
    executor = cli_executor(workers, ray)
    if st.doc_kind(run_id) == "training":
        from replaykit.train.audit import replay_training

        with render.progress(enabled=not as_json) as progress:
            report = replay_training(st, run_id, progress=progress, executor=executor)
        emit_json(report) if as_json else render.training_replay(report)
    else:
        with render.progress(enabled=not as_json) as progress:
            report = replay_run(
                st,
                run_id,
                harness_ref=harness,
                repo_path=str(harness_repo) if harness_repo else None,
                progress=progress,
                executor=executor,
            )
        emit_json(report) if as_json else render.replay_report(report)
    if not report["identical"]:
        raise typer.Exit(1)


@app.command()
def train(
    config: Path = typer.Argument(
        ..., help="YAML config with a train: section, e.g. configs/quickstart.yaml"
    ),
    epochs: Optional[int] = typer.Option(
        None, "--epochs", min=1, help="Number of epochs (default: train.epochs)."
    ),
    record_mode: RecordMode = typer.Option(
        "once",
        "--record-mode",
        help="once: reuse stored episodes, record the missing; none: replay only; all: re-record.",
    ),
    keep_going: bool = KeepGoingOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Train the harness: measure, propose, measure, judge, promote — every call recorded."""
    from replaykit.run import check_record_mode
    from replaykit.train.trainer import Trainer

    check_record_mode(record_mode)
    with render.progress(enabled=not as_json) as progress:
        trainer = Trainer(
            config_path=config, record_mode=record_mode, progress=progress, keep_going=keep_going
        )
        resumed_before = len(trainer.recorded)
        for loss in trainer.epochs(epochs):
            loss.backward()
            trainer.optimizer.step()
    summary = trainer.summary()
    if as_json:
        emit_json(summary)
        return
    ran = len(trainer.losses)  # show the epochs of this invocation; say how many were already recorded
    later = len(summary["epochs"]) - ran
    render.training_table(
        dict(summary, epochs=summary["epochs"][:ran], resumed_epochs=min(resumed_before, ran))
    )
    if later > 0:
        render.line(
            f"{later} later epoch(s) recorded earlier are not shown (--epochs {len(summary['epochs'])} shows them)"
        )


app.command("audit")(audit_cmd.audit)


@app.command()
def compare(
    config: Path = typer.Argument(..., help="YAML run config."),
    models: str = typer.Option(
        ..., "--models", help="Comma-separated model names, e.g. reference-weak,reference-strong"
    ),
    harness: str = typer.Option(
        ..., "--harness", help="Comma-separated harness refs, e.g. <initial-sha>,main"
    ),
    record_mode: RecordMode = typer.Option(
        "once",
        "--record-mode",
        help="once: reuse stored cells, record the missing; none: replay only; all: re-record.",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Measure (or reuse) every harness × model cell and print the solve-rate table."""
    from replaykit.config import load_config
    from replaykit.run import check_record_mode
    from replaykit.compare import compare as compare_cells

    check_record_mode(record_mode)
    with render.progress(enabled=not as_json) as progress:
        report = compare_cells(
            load_config(config),
            [m.strip() for m in models.split(",") if m.strip()],
            [h.strip() for h in harness.split(",") if h.strip()],
            record_mode,
            progress=progress,
        )
    emit_json(report) if as_json else render.compare_table(report)


@cassettes_app.command("ls")
def cassettes_ls(
    run_id: Optional[str] = typer.Option(None, "--run", help="Only the cassettes of this run."),
    limit: Optional[int] = typer.Option(
        None, "--limit", "-n", help="Only the newest N (default: 100 in the table, all with --json)."
    ),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List cassettes (one row per episode), oldest first."""
    from replaykit.views import count_cassettes, list_cassettes

    st = open_store(store, readonly=True)
    if limit is None and not as_json:
        limit = 100
    rows = list_cassettes(st, run_id, limit)
    if as_json:
        emit_json(rows)
    else:
        render.cassette_rows(rows, total=count_cassettes(st, run_id))


@app.command()
def runs(
    kind: Optional[Literal["measure", "training", "verdict", "compare", "probe"]] = typer.Option(
        None, "--kind", help="Only documents of this kind."
    ),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """List runs, trainings, verdicts, compare results and probes in the store (newest last)."""
    everything = open_store(store, readonly=True).list_runs()
    rows = [r for r in everything if kind is None or r["kind"] == kind]
    rows = [{k: r[k] for k in ("id", "kind", "name", "harness_sha", "model", "created_at")} for r in rows]
    emit_json(rows) if as_json else render.run_rows(rows, [r["id"] for r in everything])


@cassettes_app.command("show")
def cassettes_show(
    cassette_id: str = typer.Argument(..., help="Cassette id (a unique prefix is enough)."),
    full: bool = typer.Option(False, "--full", help="Do not truncate bodies."),
    transcript: bool = typer.Option(
        False, "--transcript", help="As a conversation: each call's new messages, replies, env steps, grade."
    ),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Show one cassette's events in order."""
    from replaykit.views import show_cassette

    if transcript:
        from replaykit.report import commands as report_cmd

        return report_cmd.show_transcript(open_store(store, readonly=True), cassette_id, as_json)
    doc = show_cassette(open_store(store, readonly=True), cassette_id, full=full or as_json)
    if as_json:
        emit_json(doc)
    else:
        render.cassette_doc(doc, full=full)


@cassettes_app.command("export")
def cassettes_export(
    root_id: str = typer.Argument(..., help="A run, training or cassette id (a unique prefix is enough)."),
    output: Optional[Path] = typer.Option(
        None,
        "-o",
        "--output",
        help="Bundle file (.tar.gz/.tgz: gzip; else plain tar) or, with --format vcr, a folder. Default: replaykit-<id>.tar.gz / replaykit-<id>-vcr/",
    ),
    fmt: Literal["bundle", "vcr", "inspect"] = typer.Option(
        "bundle",
        "--format",
        help="bundle: for `replaykit cassettes import`; vcr: vcrpy YAML cassettes of the LLM calls; inspect: Inspect AI eval logs (a folder).",
    ),
    base_url: Optional[str] = typer.Option(
        None,
        "--base-url",
        help="vcr: the client's base URL the uris are built from (default http://127.0.0.1:8765/v1).",
    ),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Export a run, training or cassette with everything it needs: a verified bundle, or vcrpy cassettes."""
    from replaykit.exchange import bundle, vcr_export

    if fmt not in ("bundle", "vcr", "inspect"):
        raise bundle.BundleError(f"unknown export format {fmt!r}; use bundle, vcr or inspect")
    if fmt == "inspect":
        return report_cmd.export_inspect(
            open_store(store), root_id, output or Path(f"replaykit-{root_id}-inspect"), as_json
        )
    if fmt == "vcr":
        report = vcr_export.export_vcr(
            open_store(store, readonly=True),
            root_id,
            output or Path(f"replaykit-{root_id}-vcr"),
            base_url or vcr_export.DEFAULT_BASE_URL,
        )
        emit_json(report) if as_json else render.vcr_export(report)
        return
    target = output or Path(f"replaykit-{root_id}.tar.gz")
    try:
        report = bundle.export_bundle(open_store(store, readonly=True), root_id, target)
    except OSError as exc:
        raise bundle.BundleError(
            f"cannot write {target}: {exc.strerror or exc}; choose another -o/--output"
        ) from exc
    emit_json(report) if as_json else render.bundle_report(report, "export")


@cassettes_app.command("import")
def cassettes_import(
    bundle_file: Path = typer.Argument(..., help="A bundle from `replaykit cassettes export`."),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Verify a bundle completely, then add it to the store in one transaction (a no-op if already there)."""
    from replaykit.exchange.bundle import import_bundle

    report = import_bundle(open_store(store), bundle_file)
    emit_json(report) if as_json else render.bundle_report(report, "import")


@cassettes_app.command("verify")
def cassettes_verify(
    bundle_file: Optional[Path] = typer.Argument(
        None, help="A bundle from `replaykit cassettes export`; without one, the whole store is checked."
    ),
    store: Optional[Path] = typer.Option(
        None, "--store", help="The store to check (with a bundle: also check the bundle against it)."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Check a bundle without importing it, or (no bundle) every blob, row and document of a store (an fsck)."""
    if bundle_file is None:
        from replaykit.exchange.fsck import verify_store

        result = verify_store(open_store(store, readonly=True))
        if as_json:
            emit_json(result)
        else:
            render.store_check(result)
        if not result["ok"]:
            raise typer.Exit(1)
        return
    from replaykit.exchange.bundle import verify_bundle

    report = verify_bundle(bundle_file, open_store(store, readonly=True) if store else None)
    emit_json(report) if as_json else render.bundle_report(report, "verify")


@images_app.command("build-base")
def images_build_base(
    tag: str = typer.Option("replaykit/base:bookworm", "--tag", help="Tag of the local base image."),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the image exists."),
    flavor: Literal["debian", "python"] = typer.Option(
        "debian",
        "--flavor",
        help="debian: bash, coreutils, python3, pytest; python: + pip, venv, uv, an offline uvx (tag replaykit/base:bookworm-python).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Build a minimal Debian bookworm image (bash, coreutils, python3) with debootstrap; cached."""
    from replaykit.envs.images import build_base_image

    if flavor == "python":
        from replaykit.envs.flavours import PYTHON_IMAGE, build_python_image

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


@tasks_app.command("check")
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
        None, "--config", help="Take env.image_aliases from this run config."
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Oracle check: the untouched environment scores 0 and solution/solve.sh scores 1."""
    from replaykit.envs.check import check_tasks

    aliases: dict[str, str] = {}
    if config:
        from replaykit.config import load_config

        aliases.update(load_config(config).env.image_aliases)
    for item in alias or []:
        source, sep, target = item.partition("=")
        if not sep or not source or not target:
            raise typer.BadParameter(f"{item!r} is not FROM=TO", param_hint="--alias")
        aliases[source] = target
    with render.progress(enabled=not as_json) as progress:
        report = check_tasks(paths, Path.cwd(), kind=env, aliases=aliases, progress=progress)
    if as_json:
        emit_json(report)
    else:
        render.tasks_check(report)
    if not report["ok"]:
        raise typer.Exit(1)


@app.command()
def certify(
    run_id: str = typer.Argument(..., help="A run id from `replaykit run`."),
    tasks: Optional[list[str]] = typer.Option(
        None, "--tasks", help="Where the run's task folders are (default: ./envs/*)."
    ),
    refresh: bool = typer.Option(False, "--refresh", help="Re-execute even where a certificate exists."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Re-execute tasks in N local processes."),
    ray: Optional[str] = typer.Option(
        None, "--ray", help="Re-execute tasks as Ray tasks: auto | ray://host:10001 | local."
    ),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Re-execute a run's recorded actions and classify each task deterministic or forked."""
    from replaykit.certify import certify_run
    from replaykit.executor import cli_executor

    with render.progress(enabled=not as_json) as progress:
        report = certify_run(
            open_store(store),
            run_id,
            tasks=tasks,
            root=Path.cwd(),
            refresh=refresh,
            progress=progress,
            executor=cli_executor(workers, ray),
        )
    if as_json:
        emit_json(report)
    else:
        render.certify_report(report)
    if not report["certified"]:
        raise typer.Exit(1)


@serve_app.command("reference")
def serve_reference(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", help="Port to listen on."),
    tasks: Optional[list[Path]] = typer.Option(
        None, "--tasks", help="Task folders the simulator knows (default: envs/*)."
    ),
    noise: bool = typer.Option(
        False,
        "--noise",
        help="Batch-dependent sampling: replies vary with concurrent load (to test `replaykit probe`).",
    ),
    as_json: bool = typer.Option(False, "--json", help='Print {"base_url": …} on stdout once listening.'),
) -> None:
    """Run the reference model server (a deterministic simulator) until Ctrl-C."""
    from replaykit.models.reference.server import serve_forever

    def ready(url: str) -> None:
        if as_json:
            emit_json({"base_url": url})
            sys.stdout.flush()
        render.err(f"reference model server on {url} (Ctrl-C to stop)")

    with port_in_use_error(host, port):
        serve_forever(host, port, tasks, on_ready=ready, noise=noise)


@app.command()
def proxy(
    name: str = typer.Option(..., "--name", help="Session name (the cassette's task id)."),
    upstream: Optional[str] = typer.Option(
        None, "--upstream", help="Upstream base URL (…/v1) or 'builtin'; optional to replay."
    ),
    record_mode: Literal["once", "none", "all"] = typer.Option(
        "once",
        "--record-mode",
        help="once: record if the session is not stored, else replay; none: replay only; all: re-record.",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(0, "--port", help="Port to listen on (default: a free one)."),
    rule: Optional[list[str]] = typer.Option(
        None, "--rule", help="Normalisation rule, repeatable: uuids, timestamps, codex-session."
    ),
    agent: Optional[Literal["codex"]] = typer.Option(
        None,
        "--agent",
        help="Apply the rules this agent needs (codex: --rule uuids --rule timestamps --rule codex-session).",
    ),
    api_key_env: str = typer.Option(
        "OPENAI_API_KEY",
        "--api-key-env",
        help="Env var holding the upstream key (sent upstream, never stored).",
    ),
    store: Optional[Path] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run the recording proxy for an external agent: record one session into the store, or replay it."""
    from replaykit.proxy_session import rules_for, run_proxy_session

    def ready(url: str, mode: str) -> None:
        render.err(f"replaykit proxy ({mode}) on {url}: point the client's base_url here; Ctrl-C to stop")

    with port_in_use_error(host, port):
        report = run_proxy_session(
            open_store(store),
            name,
            upstream,
            record_mode,
            rules_for(agent, tuple(rule or ())),
            host=host,
            port=port,
            api_key_env=api_key_env,
            on_ready=ready,
        )
    if as_json:
        emit_json(report)
    else:
        render.proxy_report(report)
    if report["mode"] == "replay" and not report["identical"]:
        raise typer.Exit(1)


from replaykit.report import commands as report_cmd  # noqa: E402

cassettes_app.command("diff")(report_cmd.cassettes_diff)
app.command("report")(report_cmd.report)
app.command("probe")(report_cmd.probe)


from replaykit.commands import maintenance  # noqa: E402

app.command("doctor")(maintenance.doctor)
app.command("gc")(maintenance.gc)
cassettes_app.command("rm")(maintenance.cassettes_rm)

from replaykit.commands import scaffold  # noqa: E402

app.command("init")(scaffold.init)
tasks_app.command("init")(scaffold.tasks_init)


def main() -> None:
    from replaykit.commands.shell import run as run_app

    sys.exit(run_app(app))


if __name__ == "__main__":
    main()
