"""Scrubbing: secret values never reach what is *stored*; live traffic is never altered.

A :class:`Scrubber` replaces secret values with ``<secret:NAME>`` in what replaykit
keeps — request forms, response bodies (the joined stream, so a secret split
across SSE chunks is caught), environment actions and output, error text and
divergence reports. The bytes an agent receives are the upstream's bytes.

A value only counts as a secret if it could be one: at least
:data:`MIN_SECRET_LENGTH` characters, :data:`MIN_DISTINCT` distinct characters,
and not a well-known placeholder key (``none``, ``EMPTY``, ``dummy``, ``ollama``,
``sk-no-key-required``, …). Scrubbing a placeholder would rewrite ordinary words
in what the model said (``echo none``), and a placeholder protects nothing.
"""

from __future__ import annotations

import re
from typing import Iterable

_Bytes = bytes  # the class below has a method called ``bytes``

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
        ordered = sorted(self.secrets.items(), key=lambda item: len(item[1]), reverse=True)
        self._names: dict[_Bytes, _Bytes] = {
            v.encode("utf-8"): f"<secret:{n}>".encode() for n, v in reversed(ordered)
        }
        self._pattern = (
            re.compile(b"|".join(re.escape(v.encode("utf-8")) for _, v in ordered)) if ordered else None
        )

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def with_secrets(self, more: dict[str, str]) -> "Scrubber":
        merged = dict(more)
        merged.update(self.secrets)
        return Scrubber(merged)

    def bytes(self, value: _Bytes) -> _Bytes:
        if self._pattern is None:
            return value
        return self._pattern.sub(lambda m: self._names[m.group(0)], value)

    def text(self, value: str) -> str:
        if self._pattern is None:
            return value
        return self.bytes(value.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")

    def chunks(self, chunks: Iterable[_Bytes]) -> list[_Bytes]:
        """Scrub a streamed body as one joined byte string (a secret split across chunk
        boundaries is caught), then cut it again where the original chunks ended; a
        boundary that fell inside a secret moves to the end of its replacement."""
        parts = [_Bytes(c) for c in chunks]
        if self._pattern is None:
            return [c for c in parts if c]
        joined = b"".join(parts)
        matches = list(self._pattern.finditer(joined))
        if not matches:
            return [c for c in parts if c]
        pieces: list[_Bytes] = []  # the scrubbed stream
        spans: list[tuple[int, int, int]] = []  # per secret: (old start, old end, new end)
        old_pos = new_pos = 0
        for m in matches:
            replacement = self._names[m.group(0)]
            pieces += [joined[old_pos : m.start()], replacement]
            new_pos += m.start() - old_pos + len(replacement)
            spans.append((m.start(), m.end(), new_pos))
            old_pos = m.end()
        pieces.append(joined[old_pos:])
        scrubbed = b"".join(pieces)

        def mapped(offset: int) -> int:
            shift = 0
            for old_start, old_end, new_end in spans:
                if offset <= old_start:
                    break
                if offset < old_end:
                    return new_end
                shift = new_end - old_end
            return offset + shift

        out: list[_Bytes] = []
        start = edge = 0
        for c in parts:
            edge += len(c)
            end = mapped(edge)
            if end > start:
                out.append(scrubbed[start:end])
                start = end
        if start < len(scrubbed):
            out.append(scrubbed[start:])
        return out


def restore(chunks: Iterable[_Bytes], values: dict[str, str]) -> list[_Bytes]:
    """The inverse of scrubbing for the credentials a replaying client presents: each
    ``<secret:NAME>`` with a value in ``values`` becomes that value again, so the agent sees
    what it saw while recording (its own key echoed back). A placeholder is never split across
    chunks (:meth:`Scrubber.chunks` moves the boundary to its end); values that could not be
    secrets (``is_secret``) are left alone, as they were never scrubbed."""
    names = {f"<secret:{n}>".encode(): v.encode("utf-8") for n, v in values.items() if v and is_secret(v)}
    parts = [_Bytes(c) for c in chunks]
    if not names:
        return parts
    pattern = re.compile(b"|".join(re.escape(n) for n in names))
    return [pattern.sub(lambda m: names[m.group(0)], c) if b"<secret:" in c else c for c in parts]


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
