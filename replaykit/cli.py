"""The ``replaykit`` command: the typer apps and one registration line per command.

Command bodies live in ``replaykit/commands/`` (one module per concern); each
parses, calls one library function, renders. Errors are mapped to one line in one place,
``replaykit.commands.shell.run``: library errors (``ReplaykitError``) exit 1, usage
errors exit 2, Ctrl-C exits 130.
"""

from __future__ import annotations

import sys

import typer

from replaykit.commands import (
    audit,
    browse,
    engine,
    environments,
    exchange,
    fork,
    maintenance,
    measure,
    replay,
    report,
    scaffold,
    servers,
    training,
    view,
)

CONTEXT = {"help_option_names": ["-h", "--help"]}


def _typer(help: str, **settings: object) -> typer.Typer:
    """A command group. Help is click's plain text (``rich_markup_mode=None``): typer's rich
    help would load rich's markdown, panels and tracebacks on every ``--help`` (about twice
    the CPU of importing typer itself), and piped it drew boxes into the text."""
    return typer.Typer(no_args_is_help=True, rich_markup_mode=None, help=help, **settings)  # type: ignore[arg-type]


app = _typer("Train agent harnesses; record and replay every run.", context_settings=CONTEXT)
cassettes_app = _typer("Inspect the cassette store.")
serve_app = _typer("Run servers.")
images_app = _typer("Docker images for tasks (no registry needed).")
tasks_app = _typer("Check and create task folders (Harbor format).")
net_app = _typer("The frozen network: what task containers fetched.")
engine_app = _typer("Real engines on loopback (llama.cpp) with deterministic settings.")
app.add_typer(cassettes_app, name="cassettes")
app.add_typer(serve_app, name="serve")
app.add_typer(images_app, name="images")
app.add_typer(tasks_app, name="tasks")
app.add_typer(net_app, name="net")
app.add_typer(engine_app, name="engine")


def _version(value: bool) -> None:
    if value:
        from replaykit.core.versions import tool_versions

        sys.stdout.write(f"replaykit {tool_versions()['replaykit']}\n")
        raise typer.Exit(0)


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", "-V", is_eager=True, callback=_version, help="Print the version and exit."
    ),
) -> None:
    """Train agent harnesses; record and replay every run."""


app.command("run")(measure.run)
app.command("replay")(replay.replay)
app.command("regrade")(replay.regrade)
app.command("train")(training.train)
app.command("transfer")(training.transfer)
app.command("audit")(audit.audit)
app.command("compare")(measure.compare)
app.command("fork")(fork.fork)
cassettes_app.command("ls")(browse.cassettes_ls)
app.command("runs")(browse.runs)
cassettes_app.command("show")(browse.cassettes_show)
net_app.command("ls")(browse.net_ls)
cassettes_app.command("export")(exchange.cassettes_export)
cassettes_app.command("import")(exchange.cassettes_import)
cassettes_app.command("verify")(exchange.cassettes_verify)
cassettes_app.command("push")(exchange.cassettes_push)
cassettes_app.command("pull")(exchange.cassettes_pull)
app.command("reproduce")(exchange.reproduce)
images_app.command("build-base")(environments.images_build_base)
tasks_app.command("check")(environments.tasks_check)
app.command("certify")(environments.certify)
serve_app.command("reference")(servers.serve_reference)
app.command("proxy")(servers.proxy)
engine_app.command("start")(engine.engine_start)
cassettes_app.command("diff")(report.cassettes_diff)
app.command("report")(report.report)
app.command("probe")(report.probe)
app.command("doctor")(maintenance.doctor)
app.command("plugins")(maintenance.plugins)
app.command("gc")(maintenance.gc)
app.command("view")(view.view)
cassettes_app.command("rm")(maintenance.cassettes_rm)
app.command("init")(scaffold.init)
tasks_app.command("init")(scaffold.tasks_init)


def main() -> None:
    from replaykit.commands.shell import run as run_app

    sys.exit(run_app(app))


if __name__ == "__main__":
    main()
