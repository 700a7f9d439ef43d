"""Scrubbing: secret values never reach what is *stored*; live traffic is never altered.

A :class:`Scrubber` replaces secret values with ``<secret:NAME>`` in what replaykit
keeps — request forms (their decoded strings too), response bodies (the joined, decoded
stream, so a secret split across SSE deltas or chunks, or JSON-escaped, is caught:
``scrub_body.py``), environment actions and output, error text and divergence reports.
The bytes an agent receives are the upstream's bytes.

A value only counts as a secret if it could be one: at least
:data:`MIN_SECRET_LENGTH` characters, :data:`MIN_DISTINCT` distinct characters,
and not a well-known placeholder key (``none``, ``EMPTY``, ``dummy``, ``ollama``,
``sk-no-key-required``, …). Scrubbing a placeholder would rewrite ordinary words
in what the model said (``echo none``), and a placeholder protects nothing.
"""

from __future__ import annotations

import hashlib
import re
from typing import Iterable

from replaykit.cassette.scrub_body import ESCAPED, LITERAL, apply_edits, body_edits

_Bytes = bytes  # the class below has a method called ``bytes``
LITERAL_BYTES, ESCAPED_BYTES = LITERAL.encode(), ESCAPED.encode()

MIN_SECRET_LENGTH = 8
MIN_DISTINCT = 5
#: keys people put in configs for endpoints that check none (compared case-insensitively)
PLACEHOLDER_KEYS = frozenset(
    {
        "none",
        "null",
        "empty",
        "dummy",
        "test",
        "testing",
        "ollama",
        "lmstudio",
        "lm-studio",
        "vllm",
        "no-key",
        "nokey",
        "no_key",
        "sk-no-key-required",
        "not-needed",
        "not-used",
        "unused",
        "placeholder",
        "changeme",
        "sk-xxx",
        "sk-dummy",
        "sk-test",
        "sk-fake",
        "fake",
        "fake-key",
        "dummy-key",
        "test-key",
        "api-key",
        "apikey",
        "your-api-key",
        "sk-1234",
        "sk-12345678",
        "replaykit-no-key",
        "replaykit-offline",
        "sk-reference-simulator",
        "token-abc123",
        "key",
        "secret",
        "password",
    }
)


def is_secret(value: str) -> bool:
    """Whether ``value`` can be a credential worth scrubbing (not a placeholder, not trivially short)."""
    value = value.strip()
    if len(value) < MIN_SECRET_LENGTH or value.lower() in PLACEHOLDER_KEYS:
        return False
    return len(set(value)) >= MIN_DISTINCT


class Scrubber:
    """Replaces secret values with ``<secret:NAME>`` in text and bytes (longest secret first)."""

    def __init__(self, secrets: dict[str, str] | None = None) -> None:
        self.secrets = {n: v for n, v in (secrets or {}).items() if v and is_secret(v)}
        self._compile()

    def add(self, name: str, value: str) -> None:
        """Scrub ``value`` as ``<secret:NAME>`` from now on, wherever this scrubber is held (the
        tape and the recorder share one): a secret that appears mid-episode (a bridge's token)."""
        if value and is_secret(value):
            self.secrets[name] = value
            self._compile()

    def _compile(self) -> None:
        ordered = sorted(self.secrets.items(), key=lambda item: len(item[1]), reverse=True)
        self._names: dict[_Bytes, _Bytes] = {
            v.encode("utf-8"): f"<secret:{n}>".encode() for n, v in reversed(ordered)
        }
        self._pattern = (
            re.compile(b"|".join(re.escape(v.encode("utf-8")) for _, v in ordered)) if ordered else None
        )
        self._text_names = {v: f"<secret:{n}>" for n, v in reversed(ordered)}
        self._text_pattern = re.compile("|".join(re.escape(v) for _, v in ordered)) if ordered else None

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def bytes(self, value: _Bytes) -> _Bytes:
        if self._pattern is None:
            return value
        return self._pattern.sub(lambda m: self._names[m.group(0)], value)

    def text(self, value: str) -> str:
        if self._pattern is None:
            return value
        return self.bytes(value.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")

    def chunks(self, chunks: Iterable[_Bytes]) -> list[_Bytes]:
        """Scrub a response body as one joined byte string, on its decoded text where it is JSON
        (a secret split across SSE deltas, tool-call arguments or chunk boundaries, or written with
        ``\\u`` escapes, is caught: ``scrub_body.py``), then cut it again where the original chunks
        ended (a boundary inside an edit moves to its end). The upstream's own placeholder-like
        text is stored escaped, so replay never restores a key into it."""
        parts = [_Bytes(c) for c in chunks]
        joined = b"".join(parts)
        edits = body_edits(joined, self._text_pattern, self._pattern, self._text_names, self.text)
        return apply_edits(parts, edits)


def restore(chunks: Iterable[_Bytes], values: dict[str, str]) -> list[_Bytes]:
    """The inverse of scrubbing for the credentials a replaying client presents: each
    ``<secret:NAME>`` the scrubber put where the recorded client's key was, with a value in
    ``values``, becomes that value again, so the agent sees what it saw while recording (its own
    key echoed back). A placeholder is never split across chunks (:meth:`Scrubber.chunks` moves
    the boundary to its end); values that could not be secrets (``is_secret``) are left alone,
    as they were never scrubbed. Placeholder-like text the upstream itself sent was stored
    escaped (``<secret:!…``): it is given back as sent, never filled with a key."""
    names = {f"<secret:{n}>".encode(): v.encode("utf-8") for n, v in values.items() if v and is_secret(v)}
    parts = [_Bytes(c) for c in chunks]
    pattern = re.compile(b"|".join(re.escape(n) for n in names)) if names else None
    out = []
    for c in parts:
        if LITERAL_BYTES in c:
            if pattern is not None:
                c = pattern.sub(lambda m: names[m.group(0)], c)
            c = c.replace(ESCAPED_BYTES, LITERAL_BYTES)
        out.append(c)
    return out


def credential_digest(value: str) -> str:
    """What a cassette keeps of a client's credential to know it again: a sha256 (never the value;
    a key has far too much entropy to be guessed from it)."""
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()


def presented_credentials(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The credential a client sent, by the name replaykit scrubs it under
    (``client_authorization``, ``client_api-key``, ``client_x-api-key``)."""
    found: dict[str, str] = {}
    for name, value in headers:
        header = name.lower()
        if header not in ("authorization", "api-key", "x-api-key"):
            continue
        value = value[7:].strip() if value.lower().startswith("bearer ") else value.strip()
        if value:
            found.setdefault(f"client_{header}", value)
    return found
