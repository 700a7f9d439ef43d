"""Scrubbing a response body on its decoded, joined text, and marking literal placeholders.

A secret can reach a response in pieces no byte search finds: one character per SSE delta,
spread over a tool call's streamed ``arguments``, or written with JSON ``\\u`` escapes. So
:func:`body_edits` decodes what it can — a JSON body, each JSON ``data:`` event of a stream —
and joins every string *channel* across events (the same path in each event: ``choices.0.
delta.content``, a tool call's ``function.arguments`` by its ``index``, a Responses ``delta``):
a secret found in the joined text is removed from every piece that holds part of it, and its
``<secret:NAME>`` placeholder put in the piece where it starts. An event is re-serialised only
when one of its strings changed; every other byte is kept as received.

Replay restores a client's own key only where the scrubber put a placeholder. Text the
upstream sent that merely *looks* like one (``<secret:client_authorization>`` written by a
model that read it somewhere) is stored escaped as ``<secret:!…`` (:data:`ESCAPE`), so a
restore never writes a live key into it; ``scrub.restore`` un-escapes it again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

#: how placeholders start; an upstream's own occurrence is stored as ``ESCAPED`` instead
LITERAL = "<secret:"
ESCAPED = "<secret:!"
#: one edit of a joined body: bytes ``[start, end)`` become ``replacement``
Edit = tuple[int, int, bytes]
_DATA = re.compile(rb"^data:[ \t]?([^\r\n]*)", re.M)
_LITERAL_B = re.compile(re.escape(LITERAL.encode()))


def is_stream(body: bytes) -> bool:
    return body.lstrip()[:6].startswith((b"data:", b"event:", b":"))


class _Piece:
    """One string of one decoded event (a value, or an object's key): where it sits (container
    + key), its text, and its new text once scrubbed (None: unchanged)."""

    __slots__ = ("container", "is_key", "key", "new", "text")

    def __init__(self, container: Any, key: Any, is_key: bool) -> None:
        self.container, self.key, self.is_key = container, key, is_key
        self.text: str = key if is_key else container[key]
        self.new: str | None = None


#: a JSON string token: outside strings JSON has no ``"``, so a scan from the start finds them all
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
Path = tuple[Any, ...]


class _Walk:
    """The strings of decoded events in document order, keys included (``pieces``: None for a
    key that needs no change), values grouped by channel; a list item that carries an ``index``
    (a streamed tool call) is on its channel's path by that index, not by its position."""

    def __init__(self, pattern: re.Pattern[str] | None, text: Callable[[str], str]) -> None:
        self.pattern, self.text = pattern, text
        self.channels: dict[Path, list[_Piece]] = {}

    def event(self, value: Any) -> list[_Piece | None]:
        pieces: list[_Piece | None] = []
        self._visit(value, (), pieces)
        return pieces

    def _key(self, container: Any, key: str, pieces: list[_Piece | None]) -> None:
        secret = self.pattern is not None and self.pattern.search(key)
        if secret or LITERAL in key:  # kept as a piece: escaped if its payload is encoded afresh
            piece = _Piece(container, key, True)
            piece.new = self.text(key.replace(LITERAL, ESCAPED)) if secret else None
            pieces.append(piece)
        else:
            pieces.append(None)

    def _value(self, path: Path, container: Any, key: Any, pieces: list[_Piece | None]) -> None:
        piece = _Piece(container, key, False)
        pieces.append(piece)
        channel = self.channels.get(path)
        if channel is None:
            self.channels[path] = [piece]
        else:
            channel.append(piece)

    def _visit(self, value: Any, path: Path, pieces: list[_Piece | None]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                self._key(value, key, pieces)
                if isinstance(item, str):
                    self._value((*path, key), value, key, pieces)
                elif isinstance(item, (dict, list)):
                    self._visit(item, (*path, key), pieces)
        elif isinstance(value, list):
            for position, item in enumerate(value):
                index = item.get("index") if isinstance(item, dict) else None
                step = ("#", index) if isinstance(index, int) and not isinstance(index, bool) else position
                if isinstance(item, str):
                    self._value((*path, step), value, position, pieces)
                elif isinstance(item, (dict, list)):
                    self._visit(item, (*path, step), pieces)


def _split(pieces: list[_Piece], pattern: re.Pattern[str] | None, names: dict[str, str]) -> None:
    """Scrub one channel's joined text into its pieces (``piece.new`` where a secret was): each
    secret leaves every piece holding part of it, its placeholder goes where it starts, and the
    rest of such a piece has its placeholder-like text escaped. A piece no secret touches is
    left to the byte pass (:func:`body_edits`), so its bytes stay exactly as received."""
    joined = "".join(p.text for p in pieces)
    matches = list(pattern.finditer(joined)) if pattern is not None else []
    if not matches:
        return
    start = 0
    for piece in pieces:
        end = start + len(piece.text)
        out, pos = [], start
        mine = [m for m in matches if m.end() > start and m.start() < end]
        if not mine:
            start = end
            continue
        for m in mine:
            if m.start() > pos:
                out.append(joined[pos : m.start()].replace(LITERAL, ESCAPED))
            if m.start() >= start:
                out.append(names[m.group(0)])
            pos = min(m.end(), end)
        out.append(joined[pos:end].replace(LITERAL, ESCAPED))
        new = "".join(out)
        if new != piece.text:
            piece.new = new
        start = end


def _token(raw: bytes, new: str, pattern: re.Pattern[bytes] | None, names: dict[bytes, bytes]) -> bytes:
    """A string token holding ``new``: the raw token scrubbed byte by byte when that gives it
    (every other byte as the upstream sent it), else ``new`` encoded afresh."""
    candidate = b"".join(apply_edits([raw], _raw_edits(raw, 0, len(raw), pattern, names)))
    try:
        if json.loads(candidate) == new:
            return candidate
    except ValueError:
        pass
    return json.dumps(new, ensure_ascii=False).encode("utf-8")


def _json_edits(
    body: bytes,
    docs: list[tuple[int, int, Any]],
    patterns: tuple[re.Pattern[str] | None, re.Pattern[bytes] | None],
    names: dict[str, str],
    text: Callable[[str], str],
) -> list[Edit]:
    """The edits of decoded JSON payloads (span, value): their channels scrubbed joined, each
    changed string replaced in place (a payload whose tokens cannot be lined up with its
    strings, e.g. a key given twice, is encoded afresh as a whole)."""
    text_pattern, byte_pattern = patterns
    raw_names = {v.encode("utf-8"): p.encode("utf-8") for v, p in names.items()}
    walk = _Walk(text_pattern, text)
    events = [walk.event(value) for _, _, value in docs]
    for channel in walk.channels.values():
        _split(channel, text_pattern, names)
    edits: list[Edit] = []
    for (start, end, value), pieces in zip(docs, events, strict=True):
        changed = [p for p in pieces if p is not None and p.new is not None]
        if not changed:
            continue
        tokens = [m.span() for m in _STRING.finditer(body, start, end)]
        if len(tokens) == len(pieces):  # each string's token, in document order
            for piece, (a, b) in zip(pieces, tokens, strict=True):
                if piece is not None and piece.new is not None:
                    edits.append((a, b, _token(body[a:b], piece.new, byte_pattern, raw_names)))
            continue
        edits.append((start, end, _afresh(value, pieces)))
    return edits


def _afresh(value: Any, pieces: list[_Piece | None]) -> bytes:
    """A payload encoded afresh with its changed strings, the upstream's placeholder-like text
    escaped in every string (none of its bytes are kept, so the byte pass cannot)."""
    for p in pieces:
        if p is not None and p.new is None and LITERAL in p.text:
            p.new = p.text.replace(LITERAL, ESCAPED)
    changed = [p for p in pieces if p is not None and p.new is not None]
    for p in sorted(changed, key=lambda p: p.is_key):  # values first: a renamed key keeps its value
        if p.is_key:
            p.container[p.new] = p.container.pop(p.key)
        else:
            p.container[p.key] = p.new
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _decoded(body: bytes) -> list[tuple[int, int, Any]]:
    """The JSON payloads of a body, with their byte spans: the body itself, or each
    ``data:`` event of a stream that is JSON (others stay bytes)."""
    if is_stream(body):
        found = []
        for m in _DATA.finditer(body):
            raw = m.group(1)
            if raw[:1] not in (b"{", b"["):
                continue
            try:
                found.append((m.start(1), m.end(1), json.loads(raw.decode("utf-8"))))
            except ValueError:
                continue
        return found
    stripped = body.strip()
    if stripped[:1] not in (b"{", b"["):
        return []
    try:
        value = json.loads(stripped.decode("utf-8"))
    except ValueError:
        return []
    start = body.index(stripped[:1])
    return [(start, start + len(stripped), value)]


def body_edits(
    body: bytes,
    text_pattern: re.Pattern[str] | None,
    byte_pattern: re.Pattern[bytes] | None,
    names: dict[str, str],
    text: Callable[[str], str],
) -> list[Edit]:
    """Every edit that scrubs ``body`` (secrets → their placeholders, on decoded and joined text
    where it is JSON, on bytes elsewhere) and escapes the upstream's own placeholder-like text;
    sorted, not overlapping. ``names``: secret value → its placeholder."""
    if text_pattern is None and LITERAL.encode() not in body:
        return []  # nothing to scrub and nothing to escape: the fast path of every secret-less call
    docs = _decoded(body)
    edits = _json_edits(body, docs, (text_pattern, byte_pattern), names, text)
    raw_names = {v.encode("utf-8"): p.encode("utf-8") for v, p in names.items()}
    covered = [(start, end) for start, end, _ in docs]
    pos = 0
    for start, end in [*covered, (len(body), len(body))]:
        edits += _raw_edits(body, pos, start, byte_pattern, raw_names)
        pos = end
    # inside JSON, what no edit re-wrote keeps its bytes: a secret still there (a key given twice
    # hides the first value from the decoded payload) is scrubbed and placeholder-like text
    # escaped byte for byte, so ``scrub.restore`` gives back exactly what was received
    spans = [(a, b) for a, b, _ in edits]
    for start, end in covered:
        for edit in _raw_edits(body, start, end, byte_pattern, raw_names):
            if not any(a < edit[1] and edit[0] < b for a, b in spans):
                edits.append(edit)
    return sorted(edits)


def _raw_edits(
    body: bytes, start: int, end: int, pattern: re.Pattern[bytes] | None, names: dict[bytes, bytes]
) -> list[Edit]:
    """Secrets and literal placeholders in ``body[start:end]`` (bytes that are not JSON)."""
    out: list[Edit] = []
    if pattern is not None:
        for m in pattern.finditer(body, start, end):
            out.append((m.start(), m.end(), names[m.group(0)]))
    taken = [(s, e) for s, e, _ in out]
    for m in _LITERAL_B.finditer(body, start, end):
        if not any(s <= m.start() < e for s, e in taken):
            out.append((m.start(), m.end(), ESCAPED.encode()))
    return out


def apply_edits(parts: list[bytes], edits: list[Edit]) -> list[bytes]:
    """The joined ``parts`` with ``edits`` applied, cut again where the parts ended; a boundary
    that fell inside an edited span moves to the end of its replacement."""
    joined = b"".join(parts)
    if not edits:
        return [c for c in parts if c]
    pieces: list[bytes] = []
    spans: list[tuple[int, int, int]] = []  # per edit: (old start, old end, new end)
    old_pos = new_pos = 0
    for start, end, replacement in edits:
        pieces += [joined[old_pos:start], replacement]
        new_pos += start - old_pos + len(replacement)
        spans.append((start, end, new_pos))
        old_pos = end
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

    out: list[bytes] = []
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
