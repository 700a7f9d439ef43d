"""Request forms and matchers, in vcrpy's style.

A *request form* is what replaykit stores and compares of an HTTP request:
``{"method", "path", "body"}`` with the body parsed as JSON (secrets scrubbed,
normalisation rules applied). Headers are never part of it, so volatile headers
(``x-stainless-*``, retry counts, user agents, API keys) cannot affect matching.

Matchers are functions ``(actual, recorded) -> None`` that raise AssertionError
with a reason; normalisation rules rewrite a parsed body. Both are registries
(``core/registry.py``) listed by ``replaykit plugins``: register more with
:func:`register_matcher` / :func:`register_rule`, or from another package under the
``replaykit.matchers`` / ``replaykit.rules`` entry-point groups (a config's
``record.rules`` and the proxy's ``--rule`` name rules).
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit

from replaykit.cassette.events import RequestForm
from replaykit.cassette.scrub import Scrubber
from replaykit.core.determinism import CLOCK_PATTERN, DATE_PATTERN, UUID_PATTERN, ZONE_PATTERN, canonical_json
from replaykit.core.registry import Registry

Matcher = Callable[[RequestForm, RequestForm], None]
NormaliseRule = Callable[[Any], Any]

MATCHERS: Registry[Matcher] = Registry("request matcher", "replaykit.matchers")
RULES: Registry[NormaliseRule] = Registry("normalisation rule", "replaykit.rules")
DEFAULT_MATCH_ON = ("method", "path", "body")


def register_matcher(name: str, fn: Matcher) -> None:
    MATCHERS.register(name, fn)


def register_rule(name: str, fn: NormaliseRule) -> None:
    """A normalisation rule rewrites a parsed body (e.g. replaces a per-turn UUID)."""
    RULES.register(name, fn)


def known_rules() -> list[str]:
    return RULES.names()


def get_rule(name: str) -> NormaliseRule:
    """The rule ``name``; an unknown one is one ``ConfigError`` line listing the known."""
    return RULES.get(name)


def _method(a: RequestForm, b: RequestForm) -> None:
    if a["method"] != b["method"]:
        raise AssertionError(f"method {a['method']} != {b['method']}")


def _path(a: RequestForm, b: RequestForm) -> None:
    if a["path"] != b["path"]:
        raise AssertionError(f"path {a['path']} != {b['path']}")


def _body(a: RequestForm, b: RequestForm) -> None:
    if canonical_json(a["body"]) != canonical_json(b["body"]):
        raise AssertionError("body differs")


register_matcher("method", _method)
register_matcher("path", _path)
register_matcher("body", _body)


def mismatches(
    actual: RequestForm, recorded: RequestForm, match_on: tuple[str, ...] = DEFAULT_MATCH_ON
) -> list[str]:
    reasons = []
    for name in match_on:
        try:
            MATCHERS.get(name)(actual, recorded)
        except AssertionError as exc:
            reasons.append(f"{name}: {exc}")
    return reasons


# -- building forms ----------------------------------------------------------------
UUID_RE = re.compile(rf"\b{UUID_PATTERN}\b", re.I)


def _walk_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_walk_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _walk_strings(v, fn) for k, v in value.items()}
    return value


def _scrub_decoded(value: Any, scrubber: Scrubber) -> Any:
    """Every string and key of a decoded body scrubbed (what the raw text hid behind escapes)."""
    if isinstance(value, str):
        return scrubber.text(value)
    if isinstance(value, list):
        return [_scrub_decoded(v, scrubber) for v in value]
    if isinstance(value, dict):
        return {scrubber.text(k): _scrub_decoded(v, scrubber) for k, v in value.items()}
    return value


def _uuids(body: Any) -> Any:
    """Replace every UUID with its order of first appearance: ``<uuid:0>``, ``<uuid:1>``, ..."""
    seen: dict[str, str] = {}

    def sub(text: str) -> str:
        return UUID_RE.sub(lambda m: seen.setdefault(m.group(0).lower(), f"<uuid:{len(seen)}>"), text)

    return _walk_strings(body, sub)


register_rule("uuids", _uuids)

# ``timestamps``: ISO-8601 dates/times anywhere in a string, and epoch numbers under
# time-like keys (also inside JSON text embedded in a string, e.g. Codex metadata).
ISO_TIME_RE = re.compile(rf"(?<![0-9]){DATE_PATTERN}(?:[T ]{CLOCK_PATTERN}{ZONE_PATTERN}?)?(?![0-9])")
_TIME_KEY = r"(?:\w*(?:time|date|created|_at|unix|timestamp)\w*|ts)"
_TIME_KEY_RE = re.compile(rf"^{_TIME_KEY}$", re.I)
_EMBEDDED_EPOCH_RE = re.compile(rf'("{_TIME_KEY}"\s*:\s*)\d{{9,14}}(?:\.\d+)?', re.I)


def _is_epoch(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 1e8 <= value < 1e14


def _timestamps(body: Any) -> Any:
    """ISO dates/times → ``<timestamp>``; epoch numbers under time-like keys → ``<timestamp>``."""

    def text(value: str) -> str:
        value = _EMBEDDED_EPOCH_RE.sub(lambda m: m.group(1) + '"<timestamp>"', value)
        return ISO_TIME_RE.sub("<timestamp>", value)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {
                k: "<timestamp>" if _TIME_KEY_RE.match(k) and _is_epoch(v) else walk(v)
                for k, v in value.items()
            }
        return value

    return walk(body)


register_rule("timestamps", _timestamps)

# ``codex-session``: what the Codex CLI puts in requests that changes run to run or
# machine to machine: its telemetry (``client_metadata``, ``prompt_cache_key``), ids
# (bare or glued: ``msg_<uuid>``), the workspace and CODEX_HOME paths, per-command
# ``Chunk ID`` / ``Wall time`` lines. Object keys are sorted first (Codex serialises
# some maps in hash order), so ids — and ``<uuid:N>`` labels left by the ``uuids``
# rule — are numbered by first appearance in a stable walk: ``<id:0>``, ``<id:1>``...
_ID_RE = re.compile(rf"<uuid:\d+>|(?<![0-9a-fA-F]){UUID_PATTERN}(?![0-9a-fA-F])")
_CWD_RE = re.compile(r"<cwd>([^<\n]+)</cwd>")
_CODEX_HOME_RE = re.compile(r"`(/[^`\n]*?)/skills/\.system`")
_CODEX_TELEMETRY = ("client_metadata", "prompt_cache_key")
_CODEX_VOLATILE = (
    (re.compile(r"\bChunk ID: [0-9A-Za-z]+"), "Chunk ID: <id>"),
    (re.compile(r"\bWall time: \d+(?:\.\d+)? seconds"), "Wall time: <duration>"),
    (re.compile(r'("duration_seconds"\s*:\s*)\d+(?:\.\d+)?'), r'\g<1>"<duration>"'),
)


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, list):
        return [_sorted_keys(v) for v in value]
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def _codex_session(body: Any) -> Any:
    """Normalise the Codex CLI's volatile request content (see the comment above)."""
    body = _sorted_keys(body)
    if isinstance(body, dict):
        body = {k: f"<codex:{k}>" if k in _CODEX_TELEMETRY else v for k, v in body.items()}
    paths: dict[str, str] = {}
    for s in _strings(body):
        for m in _CWD_RE.finditer(s):
            paths.setdefault(m.group(1).rstrip("/"), "<cwd>")
        for m in _CODEX_HOME_RE.finditer(s):
            paths.setdefault(m.group(1).rstrip("/"), "<codex_home>")
    ordered = sorted((p for p in paths if len(p) > 1), key=len, reverse=True)
    seen: dict[str, str] = {}

    def sub(text: str) -> str:
        for path in ordered:
            text = text.replace(path, paths[path])
        text = _ID_RE.sub(lambda m: seen.setdefault(m.group(0).lower(), f"<id:{len(seen)}>"), text)
        for pattern, repl in _CODEX_VOLATILE:
            text = pattern.sub(repl, text)
        return text

    return _walk_strings(body, sub)


register_rule("codex-session", _codex_session)


def _cwd(body: Any) -> Any:
    """The proxy's working directory (as resolved, and as ``$PWD`` spells it) → ``<cwd>``."""
    folders = {str(Path.cwd())}
    pwd = os.environ.get("PWD")
    if pwd and os.path.isdir(pwd) and os.path.samefile(pwd, Path.cwd()):
        folders.add(pwd.rstrip("/") or "/")
    folders.discard("/")  # "/" is in every path: never a working directory worth hiding
    if not folders:
        return body
    pattern = re.compile(
        "|".join(re.escape(f) for f in sorted(folders, key=len, reverse=True)) + r"(?![\w.-])"
    )
    return _walk_strings(body, lambda text: pattern.sub("<cwd>", text))


register_rule("cwd", _cwd)


def request_form(
    method: str,
    url: str,
    body: bytes | str | None,
    scrubber: Scrubber | None = None,
    rules: tuple[str, ...] = (),
) -> RequestForm:
    """The canonical, storable form of a request."""
    parts = urlsplit(url)
    path = parts.path
    if parts.query:
        path += "?" + urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    raw = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    if scrubber:
        raw = scrubber.text(raw)
    parsed: Any
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = {"$text": raw}
    if scrubber:  # the decoded strings too: a secret written with JSON \u escapes is caught
        parsed = _scrub_decoded(parsed, scrubber)
    for name in rules:
        parsed = get_rule(name)(parsed)
    return {"method": method.upper(), "path": path, "body": parsed}


def request_diff(expected: RequestForm | None, actual: RequestForm | None) -> list[str]:
    """A unified diff of two request forms, pretty-printed."""

    def lines(form: RequestForm | None) -> list[str]:
        if form is None:
            return ["(no request)"]
        return json.dumps(form, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    return list(
        difflib.unified_diff(lines(expected), lines(actual), "recorded", "replayed", lineterm="", n=2)
    )
