"""Which ``Host`` and ``Origin`` a local server answers to: its own names, never another.

A web page on another site can make the browser send requests to ``127.0.0.1:PORT`` under
its own name (DNS rebinding: ``evil.example`` resolved to loopback) and read the answers as
same-origin, or post to it cross-site without reading (a ``text/plain`` POST needs no
preflight). The viewer would show the store to any page the user opens; the recording proxy
would spend the user's key. The browser still sends ``Host: evil.example`` (and, cross-site,
``Origin: http://evil.example``), so these servers answer only requests whose ``Host`` is the
address they are bound to (any port: an ``ssh -L`` forward keeps the name), ``localhost`` when
bound to loopback, and, bound to every interface, any IP literal (a literal cannot be
rebound) or this machine's own name (:class:`HostCheck`); the proxy also refuses an
``Origin`` that is not its own or one the user allowed (:class:`OriginCheck`).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from replaykit.core.errors import ConfigError

LOOPBACK_NAMES = frozenset({"127.0.0.1", "::1", "localhost"})


def _literal(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class HostCheck:
    """The names a server bound to ``bound`` (an address, as ``socket.getsockname`` gives it) answers to."""

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
        """Does a request with this ``Host`` header come for this server?"""
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


def origin_of(text: str) -> str | None:
    """``scheme://host[:port]`` as a browser serialises an ``Origin`` (lower-case, default port
    dropped), or None when ``text`` is not one (a path, a query, credentials, ``null``)."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username is not None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    default = {"http": 80, "https": 443}[parts.scheme]
    return f"{parts.scheme}://{host}" + ("" if port in (None, default) else f":{port}")


def allowed_origins(values: Iterable[str]) -> tuple[str, ...]:
    """``--allow-origin`` values as origins; a value that is not one is a ``ConfigError``."""
    origins = []
    for value in values:
        origin = origin_of(value)
        if origin is None:
            raise ConfigError(
                f"--allow-origin {value!r} is not an origin; give scheme://host[:port], "
                "e.g. http://localhost:5173"
            )
        origins.append(origin)
    return tuple(origins)


class OriginCheck:
    """The ``Origin`` a server answers to: none (not a browser), its own (a page it served
    itself, under one of ``hosts``' names and its ``port``), or one the user allowed."""

    def __init__(self, hosts: HostCheck, port: int, allowed: Iterable[str] = ()) -> None:
        self.hosts, self.port = hosts, port
        self.allowed = frozenset(allowed_origins(allowed))

    def own(self, origin: str) -> bool:
        parts = urlsplit(origin)
        return parts.port == self.port and self.hosts.allows(parts.netloc)

    def allows(self, header: str | None) -> bool:
        """Does a request carrying this ``Origin`` header (None: absent) come from a client
        this server may serve? ``null`` (a sandboxed frame, a ``file://`` page) never does."""
        if header is None:
            return True
        origin = origin_of(header)
        return origin is not None and (origin in self.allowed or self.own(origin))

    def cross_site(self, header: str | None) -> str | None:
        """The origin to name in CORS answers: an allowed origin that is not the server's own."""
        origin = origin_of(header) if header else None
        return origin if origin is not None and origin in self.allowed and not self.own(origin) else None
