"""Where the frozen network's proxy may connect (standard library only: the addon imports it).

The proxy runs on the host, so whatever it connects to, it reaches as the host: its
loopback services (the viewer, hence the store; a PostgreSQL port), the link-local cloud
metadata address, the machines of a private network. A task container asking for one of
those is refused, a 403 naming the address and what to do, unless the task's config names
that very ``host:port`` (``env.network_allow: ["127.0.0.1:PORT"]``, a local test upstream).
A name is resolved before it is judged, and the connection goes to the address judged
(a name that resolves elsewhere a moment later is not followed).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Collection
from dataclasses import dataclass

REFUSED_HEADER = "x-replaykit-refused"


#: what the proxy refuses, by kind (the documentation and other reserved ranges are left alone:
#: a sandbox may resolve public names into them)
REFUSED = {
    "the host's loopback": ("127.0.0.0/8", "::1/128"),
    "the host itself (unspecified address)": ("0.0.0.0/8", "::/128"),
    "link-local": ("169.254.0.0/16", "fe80::/10"),
    "a private address": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"),
}
_NETWORKS = [(kind, ipaddress.ip_network(net)) for kind, nets in REFUSED.items() for net in nets]


def kind_of(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """What makes ``address`` the host's own or a private one (None: the proxy may reach it)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for kind, network in _NETWORKS:
        if address.version == network.version and address in network:
            return kind
    return None


def entry(host: str, port: int) -> str:
    """``host:port`` as ``env.network_allow`` names it (IPv6 literals in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` names (itself when it is one; none when it does not resolve)."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class Judged:
    """``refused`` (one line) or None; ``address``: what to connect to (None: as named)."""

    refused: str | None
    address: str | None = None


def judge(host: str, port: int, allow: Collection[str]) -> Judged:
    """May the proxy connect to ``host:port``? ``allow``: ``env.network_allow``'s entries."""
    named = entry(host.strip("[]").lower(), port)
    if named in allow:
        return Judged(None)
    addresses = resolve(host, port)
    for address in addresses:
        kind = kind_of(ipaddress.ip_address(address))
        if kind is not None and entry(address, port) not in allow:
            shown = named if address == host.strip("[]") else f"{named} ({address})"
            return Judged(
                f"replaykit: the frozen network refuses {shown}: {kind}, reached from the task container"
                f' as the host; if the task needs it, allow it with env.network_allow: ["{named}"]'
            )
    return Judged(None, addresses[0] if addresses else None)
