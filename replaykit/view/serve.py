"""Serving the viewer: bind the socket (loopback unless told otherwise), then uvicorn until Ctrl-C."""

from __future__ import annotations

import ipaddress
import socket
from typing import Callable, Literal, TypedDict

from replaykit.cassette.backend import BrowseStore
from replaykit.core.errors import ReplaykitError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0 picks a free port); a busy port is one line."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ReplaykitError(f"cannot listen on {host!r}: {exc.strerror}; pass --host 127.0.0.1") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ReplaykitError(
            f"cannot listen on {host}:{port}: {exc.strerror.lower() if exc.strerror else exc}; "
            "choose another --port (0 picks a free one)"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


class Serving(TypedDict):
    """What ``replaykit view`` serves, once it listens (``view --json``)."""

    url: str
    store: str  # the store as the command named it
    search_index: str  # the search sidecar's path (``view/search.py``)
    read_only: Literal[True]


def serve(
    store: BrowseStore,
    sock: socket.socket,
    poll_seconds: float,
    on_ready: Callable[[Serving], None],
    on_index: Callable[[int, int], None] | None = None,
    named: str = "",
) -> None:
    """Serve ``store`` (opened read-only) on ``sock`` until Ctrl-C; ``on_ready`` hears where
    (``named``: the store as the user chose it; default its location), ``on_index(indexed,
    total)`` how far the search index is while it catches up."""
    import uvicorn

    from replaykit.core.hosts import HostCheck
    from replaykit.view.app import create_app
    from replaykit.view.search import index_path

    store.change_token()  # a missing or foreign store fails here, before the URL is printed
    app = create_app(
        store, poll_seconds=poll_seconds, hosts=HostCheck(sock.getsockname()[0]), on_index=on_index
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False)
    server = uvicorn.Server(config)
    on_ready(
        {
            "url": url_of(sock),
            "store": named or str(store.location),
            "search_index": str(index_path(store.location)),
            "read_only": True,
        }
    )
    try:
        server.run(sockets=[sock])
    finally:
        store.close()
