"""What the proxy answers when it forwards nothing: OpenAI-shaped error bodies, the header
that tells an SDK not to retry, and the HTTP/2 refusal (the proxy speaks HTTP/1.1)."""

from __future__ import annotations

import json
import struct
from typing import Any

#: On answers a retry cannot fix (a divergence, a malformed request): the openai SDKs
#: honour ``x-should-retry: false`` and give up at once instead of retrying with backoff.
NO_RETRY = [("x-should-retry", "false")]


#: what an HTTP/2 client that speaks it from the first byte (prior knowledge) is told
HTTP2_REFUSED = (
    "replaykit proxy: an HTTP/2 client was refused: the proxy speaks HTTP/1.1; "
    "configure the client for HTTP/1.1 (httpx: http1=True, curl: --http1.1)"
)
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n"


def http2_goaway(message: str) -> bytes:
    """An empty SETTINGS frame, then GOAWAY(last stream 0, HTTP_1_1_REQUIRED) carrying ``message``:
    how an HTTP/2 server tells a client to use HTTP/1.1 (RFC 9113, 7: error code 0xd)."""
    debug = message.encode()
    settings = struct.pack(">I", 0)[1:] + bytes([0x4, 0]) + struct.pack(">I", 0)
    goaway = struct.pack(">I", 8 + len(debug))[1:] + bytes([0x7, 0]) + struct.pack(">III", 0, 0, 0xD) + debug
    return settings + goaway


def error_body(message: str, type_: str, code: str | None = None, **extra: Any) -> bytes:
    """An OpenAI-shaped ``{"error": {...}}`` body."""
    error = {"message": message, "type": type_, "param": None, "code": code, **extra}
    return json.dumps({"error": error}, ensure_ascii=False).encode("utf-8")
