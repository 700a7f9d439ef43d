"""``view``: the local, read-only web viewer over the store (until Ctrl-C)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import typer

from replaykit import render
from replaykit.commands.options import ConfigStoreOpt, JsonOpt, StoreOpt, choose_store, emit_json, open_store


def index_progress(every: float = 5.0) -> Callable[[int, int], None]:
    """What the search index's catching up prints on stderr: how far, at most every ``every``
    seconds, and when it is done (the first search of a large store reads every episode once)."""
    import time

    last = [0.0]

    def told(indexed: int, total: int) -> None:
        now = time.monotonic()
        if indexed < total and now - last[0] < every:
            return
        last[0] = now
        state = "searchable" if indexed >= total else "indexed so far (searches meanwhile find only those)"
        render.err(f"search index: {indexed:,} of {total:,} episode(s) {state}")

    return told


def view(
    store: Optional[str] = StoreOpt,
    config: Optional[Path] = ConfigStoreOpt,
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on (loopback; another needs --allow-remote)."
    ),
    port: int = typer.Option(
        8770, "--port", min=0, max=65535, help="Port to listen on (0 picks a free one)."
    ),
    allow_remote: bool = typer.Option(
        False,
        "--allow-remote",
        help="Allow a --host that is not loopback: anyone who reaches the port can read the whole store.",
    ),
    no_open: bool = typer.Option(False, "--no-open", help="Do not open the viewer in a web browser."),
    poll: float = typer.Option(
        2.0,
        "--poll",
        min=0.0,
        max=3600.0,
        help="Seconds between a page's checks for new recordings (0: never refresh).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Browse trainings, runs, verdicts, episodes and compare results in a web browser (read-only)."""
    from replaykit.view.serve import Serving, bind, is_loopback, serve

    if not is_loopback(host) and not allow_remote:
        raise typer.BadParameter(
            f"{host!r} is not a loopback address; the viewer has no login, so add --allow-remote to serve it there",
            param_hint="--host",
        )
    location = choose_store(store, config)[0]
    st = open_store(store, readonly=True, config=config)
    st.change_token()  # a missing or foreign store is one line here, before a port is taken
    sock = bind(host, port)

    def ready(serving: Serving) -> None:
        url = serving["url"]
        if not is_loopback(host):
            render.err(
                f"warning: serving the store on {host}, not loopback: anyone who reaches {url} can read it"
            )
        if as_json:
            emit_json(serving)
            sys.stdout.flush()
        else:
            render.line(f"replaykit view on {url} (store {location}, read-only; Ctrl-C to stop)")
        if not no_open:
            import webbrowser

            if not webbrowser.open(url):
                render.err(f"no web browser found: open {url} yourself")

    try:
        serve(st, sock, poll, ready, index_progress(), named=location)
    except KeyboardInterrupt:
        render.err("viewer stopped")
        raise typer.Exit(130) from None
    finally:
        sock.close()
