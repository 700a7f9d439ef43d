"""``serve reference`` and ``proxy``: long-running servers (until Ctrl-C); a busy port is one line."""

from __future__ import annotations

import contextlib
import errno
import sys
from pathlib import Path
from typing import Iterator, Literal, Optional

import typer

from replaykit import render
from replaykit.commands.options import JsonOpt, StoreOpt, emit_json, open_store
from replaykit.core.errors import ConfigError, ReplaykitError
from replaykit.core.modes import RecordMode, SessionMode


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


#: how a session ended by a signal exits: Ctrl-C is 130 (128 + SIGINT) like every command; SIGTERM,
#: the way a supervisor ends a session it started, is a clean stop (exit 0)
_SIGNAL_EXIT = {"SIGINT": 130}


def serve_reference(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port to listen on."),
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
        try:
            serve_forever(host, port, tasks, on_ready=ready, noise=noise)
        except KeyboardInterrupt:
            render.err("reference model server stopped")
            raise typer.Exit(130) from None


def proxy(
    name: str = typer.Option(..., "--name", help="Session name (the cassette's task id)."),
    upstream: Optional[str] = typer.Option(
        None, "--upstream", help="Upstream base URL (…/v1) or 'builtin'; optional to replay."
    ),
    record_mode: SessionMode = typer.Option(
        SessionMode.ONCE,  # type: ignore[attr-defined]
        "--record-mode",
        help="once: record if the session is not stored, else replay it (with --upstream, recording the turns that "
        "continue a recording that stopped early); none: replay only; all: re-record.",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Port to listen on (default: a free one)."),
    rule: Optional[list[str]] = typer.Option(
        None,
        "--rule",
        help="Normalisation rule, repeatable: uuids, timestamps, codex-session, cwd (this folder → <cwd>).",
    ),
    rule_file: Optional[Path] = typer.Option(
        None,
        "--rule-file",
        help="YAML of named regex replacements (rules: {NAME: {pattern: RE, replace: TEXT}}), applied like --rule.",
    ),
    timeout: float = typer.Option(
        600.0,
        "--timeout",
        min=0.001,
        max=7 * 86400.0,
        help="Seconds one upstream exchange may take in all (connect to last byte).",
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
    allow_origin: Optional[list[str]] = typer.Option(
        None,
        "--allow-origin",
        help="A browser origin (scheme://host[:port]) whose pages may call the proxy, repeatable; any "
        "other Origin, or a Host that is not the proxy's address, is refused (403).",
    ),
    store: Optional[str] = StoreOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run the recording proxy for an external agent: record one session into the store, or replay it."""
    from replaykit.core.hosts import allowed_origins
    from replaykit.episodes.proxy_keys import rules_for
    from replaykit.episodes.proxy_session import run_proxy_session

    try:
        origins = allowed_origins(allow_origin or ())  # a usage error, before the store is opened
    except ConfigError as exc:
        raise typer.BadParameter(
            str(exc).removeprefix("--allow-origin "), param_hint="--allow-origin"
        ) from None

    def ready(url: str, mode: str) -> None:
        render.err(f"replaykit proxy ({mode}) on {url}: point the client's base_url here; Ctrl-C to stop")

    with port_in_use_error(host, port):
        report = run_proxy_session(
            open_store(store),
            name,
            upstream,
            RecordMode(record_mode.value),
            rules_for(agent, tuple(rule or ())),
            host=host,
            port=port,
            api_key_env=api_key_env,
            timeout=timeout,
            rule_file=rule_file,
            on_ready=ready,
            on_line=lambda text: render.err(f"replaykit proxy: {text}"),
            allow_origins=origins,
        )
    if as_json:
        emit_json(report)
    else:
        render.proxy_report(report)
    if report.get("stopped_by") in _SIGNAL_EXIT:  # the session is kept and reported first
        raise typer.Exit(_SIGNAL_EXIT[report["stopped_by"]])
    if report["mode"] == "replay" and not report["identical"]:
        raise typer.Exit(1)
