"""The narrow scrubbing certification applies to observations before comparing them:
addresses, uuids, timestamps, dates, clock times, durations, and the volatile parts of
download progress lines (apt's "Fetched 15.0 MB in 22s (690 kB/s)", pip's rates and ETAs,
curl's progress meter, wget's rates). Used only to compare a
re-execution with its recording, never inside keys, never on what is stored.
"""

from __future__ import annotations

import re

from replaykit.core.determinism import CLOCK_PATTERN, DATE_PATTERN, UUID_PATTERN, ZONE_PATTERN

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
#: (pattern, replacement), applied in order. Narrow on purpose: a scrubbed field can no
#: longer fork, so nothing broader than these volatile shapes is hidden.
SCRUBBERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"\b{UUID_PATTERN}\b"), "<uuid>"),
    (re.compile(r"\b0x[0-9a-fA-F]{4,16}\b"), "0x<addr>"),
    (re.compile(rf"\b{DATE_PATTERN}[T ]{CLOCK_PATTERN}(?:{ZONE_PATTERN}|\s?UTC)?"), "<timestamp>"),
    (
        re.compile(
            rf"\b{_DAY},? (?:\d{{1,2}} {_MONTH}|{_MONTH} +\d{{1,2}}),? \d{{2}}:\d{{2}}:\d{{2}}(?: [A-Z]{{2,5}})? \d{{4}}\b"
        ),
        "<timestamp>",
    ),
    (re.compile(rf"\b{_MONTH} +\d{{1,2}} +(?:\d{{2}}:\d{{2}}|\d{{4}})\b"), "<date>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}\.\d+\b"), "<time>"),
    # download progress (apt, pip, curl, wget): speeds, elapsed times, ETAs; the sizes stay
    (
        re.compile(
            r"\b(Fetched \d[\d.,]* ?[kMG]?B) in (?:\d+h ?)?(?:\d+min ?)?\d+(?:\.\d+)?s \([\d.,]+ ?[kMG]?B/s\)"
        ),
        r"\1 in <duration> (<rate>)",
    ),
    (re.compile(r"\b\d+(?:\.\d+)? ?(?:[kKMG]i?)?B/s\b"), "<rate>"),
    (re.compile(r"\beta (?:\d+:)?\d+:\d+\b"), "eta <eta>"),
    (
        re.compile(
            r"(?m)^ *\d{1,3} +(\S+) +\d{1,3} +\S+ +\d{1,3} +\S+ +\S+ +\S+ +(?:[-\d:]{8} +){3}\S+ *\r?$"
        ),
        r"<curl progress, total \1>",
    ),
    (
        re.compile(
            r"(?m)^( *\d+[KMG] (?:[. ]{10,11}){1,5} *\d{1,3}%) +[\d.]+[KMG]?(?:=[\d.]+s| +[\dhms.]+s?)$"
        ),
        r"\1 <rate> <eta>",
    ),
    (re.compile(r"\bin \d+(?:\.\d+)?s\b"), "in <duration>"),
    (re.compile(r"\b\d+\.\d+ ?(?:s|ms|us|µs|ns|sec|secs|seconds?)\b"), "<duration>"),
    (re.compile(r"\b\d+ ?(?:ms|us|µs|ns)\b"), "<duration>"),
)


def scrub(text: str) -> str:
    """Replace volatile shapes (used only to compare observations, never in keys)."""
    for pattern, replacement in SCRUBBERS:
        text = pattern.sub(replacement, text)
    return text
