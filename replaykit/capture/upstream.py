"""The proxy's side towards the real model endpoint.

Where a proxied request goes (:class:`Upstream`: ``scheme://host:port/base``), which
client headers are never forwarded (:data:`DROPPED_HEADERS`), and how an upstream
body is read as it arrives (:func:`upstream_pieces`: one piece per HTTP chunk
frame, so the proxy can relay and record the response's chunking unchanged).
"""

from __future__ import annotations

import http.client
import ipaddress
from typing import Iterable, Iterator
from urllib.parse import urlsplit

from replaykit.capture.conversations import split_session
from replaykit.core.errors import ConfigError

#: never forwarded upstream: hop-by-hop headers, the client's credentials, framing we redo
DROPPED_HEADERS = frozenset(
    {
        "host",
        "authorization",
        "api-key",
        "x-api-key",
        "proxy-authorization",
        "proxy-connection",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "accept-encoding",
        "content-encoding",
        "expect",
    }
)


def upstream_identity(url: str) -> str:
    """What a proxy session is keyed by: the upstream as a service, not as typed —
    ``scheme://host/base`` with the scheme and host in lower case, every loopback name
    (``localhost``, ``127.0.0.1``, ``[::1]``) as ``localhost``, no port (a local engine
    restarted on another port is the same upstream) and no trailing slash; ``builtin``
    stays ``builtin``. A value that is not an http(s) URL is returned stripped of its slash."""
    if url == "builtin":
        return url
    parts = urlsplit(url.strip().rstrip("/"))
    host = (parts.hostname or "").lower()
    if parts.scheme.lower() not in ("http", "https") or not host:
        return url.rstrip("/")
    if host == "localhost" or _is_loopback(host):
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}{parts.path.rstrip('/')}"


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Upstream:
    """The real endpoint: ``scheme://host:port/base`` (the base path replaces the proxy's ``/v1``)."""

    def __init__(self, url: str, api_key: str = "", timeout: float = 600.0) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"upstream {url!r} is not an http(s) URL; pass e.g. --upstream https://api.example.com/v1"
            )
        self.url = url.rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base = parts.path.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def path_for(self, client_path: str) -> str:
        """``/v1/responses?x`` (or ``/s/<session>/v1/responses?x``) → ``<base>/responses?x``."""
        client_path = split_session(client_path)[1]
        rest = client_path[3:] if client_path.startswith("/v1") else client_path
        return self.base + rest

    def forward_headers(self, client_headers: Iterable[tuple[str, str]], body: bytes) -> dict[str, str]:
        """The client's headers as sent upstream: dropped ones removed, this upstream's key, our framing."""
        headers = {k: v for k, v in client_headers if k.lower() not in DROPPED_HEADERS}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        headers["Accept-Encoding"] = "identity"
        headers["Content-Length"] = str(len(body))
        return headers


def upstream_pieces(resp: http.client.HTTPResponse) -> Iterator[bytes]:
    """The body as it arrives: one piece per HTTP chunk frame when chunked, else per read."""
    if not resp.chunked:
        while piece := resp.read1(65536):
            yield piece
        return
    fp = resp.fp
    while True:
        line = fp.readline(65537)
        if not line:
            return
        size = int(line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while fp.readline(65537) not in (b"\r\n", b"\n", b""):
                pass
            return
        data = fp.read(size)
        fp.read(2)
        yield data
