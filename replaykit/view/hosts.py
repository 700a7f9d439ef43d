"""Which ``Host`` the viewer answers to: its bound address, never another name.

A web page on another site can make the browser send requests to ``127.0.0.1:8770`` under
its own name (DNS rebinding: ``evil.example`` resolved to loopback) and read the answers as
same-origin; the store would be readable by any page the user opens. The browser still sends
``Host: evil.example``, so the viewer answers only requests whose ``Host`` is the address it
is bound to (any port: an ``ssh -L`` forward keeps the name), ``localhost`` when bound to
loopback, and, bound to every interface (``--allow-remote``), any IP literal (a literal cannot
be rebound) or this machine's own name. Anything else is a 400 with one line.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"127.0.0.1", "::1", "localhost"})


def _literal(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class HostCheck:
    """The names a viewer bound to ``bound`` (an address, as ``socket.getsockname`` gives it) answers to."""

    def __init__(self, bound: str) -> None:
        address = _literal(bound)
        self.bound = bound
        self.wildcard = address is not None and address.is_unspecified
        names = {bound.lower()}
        if address is None or address.is_loopback or self.wildcard:
            names |= LOOPBACK_NAMES
        if address is None or not address.is_loopback:  # served beyond loopback: this machine's names
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        self.names = frozenset(n for n in names if n)

    def allows(self, header: str | None) -> bool:
        """Does a request with this ``Host`` header come for this viewer?"""
        if not header:
            return False
        try:
            parts = urlsplit(f"//{header}")
            name, _ = parts.hostname, parts.port  # a malformed port raises
        except ValueError:
            return False
        if not name or parts.username is not None or parts.path:
            return False
        name = name.rstrip(".").lower()
        return name in self.names or (self.wildcard and _literal(name) is not None)

    def expected(self) -> str:
        return "an IP address of this machine" if self.wildcard else self.bound


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
