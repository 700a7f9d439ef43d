"""The viewer's ``Host`` guard: an ASGI wrapper over :class:`~replaykit.core.hosts.HostCheck`
(the names a local server answers to; the recording proxy checks the same names). A request
for another name is a 400 with one line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from replaykit.core.hosts import HostCheck

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def host_guard(app: ASGIApp, check: HostCheck) -> ASGIApp:
    """``app``, answering a request whose ``Host`` is not one of ``check``'s names with a 400."""

    async def guarded(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
            if not check.allows(header):
                text = (
                    f"this viewer answers only to Host {check.expected()}, not {str(header)[:80]!r}"
                    " (a page of another site cannot read the store); open the address it printed\n"
                )
                body = text.encode("utf-8")
                head = [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                ]
                await send({"type": "http.response.start", "status": 400, "headers": head})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded
