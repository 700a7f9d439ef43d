"""How a recorded exchange is matched and what of it is stored (standard library only:
the mitmproxy addon imports this module too, from its own virtualenv).

A request matches a recorded one by method + URL (credentials scrubbed) + a normalised
body: JSON bodies in canonical form, form bodies with sorted fields, anything else by its
bytes. Request headers never enter the key (they are volatile or credentials). What is
stored of a response: status, reason, the headers that are not volatile or credentials,
and the body (a content-addressed blob). The shapes of what the addon writes (its logs'
lines, a served recording's ``index.json``) are the TypedDicts below.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import NotRequired, TypedDict
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: query parameters whose values are credentials: scrubbed from stored URLs and keys
SECRET_PARAMS = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "auth",
        "client_secret",
        "key",
        "password",
        "secret",
        "sig",
        "signature",
        "token",
        "x-amz-credential",
        "x-amz-security-token",
        "x-amz-signature",
    }
)
SCRUBBED = "<scrubbed>"

#: a stored response header: (lower-cased name, value); a list of two once read back as JSON
Header = Sequence[str]


class RequestForm(TypedDict):
    """What is kept of a request: never its headers or body, only the body's digest."""

    method: str
    url: str  # credentials scrubbed
    match: str  # the look-up key (:func:`match_key`)
    request_body: str  # digest of the normalised body
    request_size: int


class ServedResponse(TypedDict):
    """A recorded response as the proxy serves it: the values of ``index.json`` (by match key)."""

    status: int
    reason: str
    headers: Sequence[Header]
    body: str  # sha256 of the body, its file under ``bodies/``
    size: int


class ExchangeRecord(RequestForm, ServedResponse):
    """One line of ``exchanges.jsonl``: a completed exchange."""

    source: str  # upstream | store
    seq: NotRequired[int]  # the order the addon logged it in


class MissRecord(TypedDict):
    """One line of ``misses.jsonl``: a request a replaying proxy could not serve."""

    method: str
    url: str
    match: str
    seq: NotRequired[int]


class ErrorRecord(TypedDict):
    """One line of ``errors.jsonl``: an upstream failure."""

    method: str
    url: str
    error: str
    seq: NotRequired[int]


#: response headers never stored: volatile (they change between two identical fetches),
#: credentials, or hop-by-hop (they describe one connection, not the content)
DROPPED_RESPONSE_HEADERS = frozenset(
    {
        "age",
        "cf-ray",
        "connection",
        "date",
        "expires",
        "keep-alive",
        "proxy-authenticate",
        "proxy-connection",
        "server-timing",
        "set-cookie",
        "set-cookie2",
        "transfer-encoding",
        "via",
        "x-amz-cf-id",
        "x-amz-request-id",
        "x-cache",
        "x-cache-hits",
        "x-request-id",
        "x-served-by",
        "x-timer",
        "content-length",  # recomputed from the stored body when served
    }
)


def scrub_url(url: str) -> str:
    """``url`` without user:password and with credential query values replaced."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:  # IPv6 literal
        netloc = f"[{netloc}]"
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in SECRET_PARAMS for k, _ in pairs):
            query = urlencode([(k, SCRUBBED if k.lower() in SECRET_PARAMS else v) for k, v in pairs])
    return urlunsplit((parts.scheme.lower(), netloc.lower(), parts.path or "/", query, ""))


def normalised_body(content: bytes, content_type: str) -> bytes:
    """The request body as it enters the match key."""
    if not content:
        return b""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        try:
            value = json.loads(content)
        except ValueError:
            return content
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    if kind == "application/x-www-form-urlencoded":
        pairs = parse_qsl(content.decode("latin-1"), keep_blank_values=True)
        return urlencode(
            sorted((k, SCRUBBED if k.lower() in SECRET_PARAMS else v) for k, v in pairs)
        ).encode()
    return content


def body_digest(content: bytes, content_type: str = "") -> str:
    return hashlib.sha256(normalised_body(content, content_type)).hexdigest()


def key_of(method: str, scrubbed_url: str, request_body: str) -> str:
    """The look-up key from what a recording keeps (method, scrubbed URL, body digest)."""
    return hashlib.sha256(f"{method.upper()}\n{scrubbed_url}\n{request_body}".encode()).hexdigest()


def match_key(method: str, url: str, content: bytes = b"", content_type: str = "") -> str:
    """The look-up key of a request: method, scrubbed URL and normalised body."""
    return key_of(method, scrub_url(url), body_digest(content, content_type))


def stored_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The response headers kept: lower-cased names, volatile ones and credentials dropped."""
    return [(k.lower(), v) for k, v in headers if k.lower() not in DROPPED_RESPONSE_HEADERS]
