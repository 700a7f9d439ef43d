"""Huge outputs capped for the page (the full text one click away: ``?full=1``)."""

from __future__ import annotations

#: Characters of one message, output or raw event shown before "show all".
CAP = 4000


def capped(text: str, full: bool = False, cap: int = CAP) -> tuple[str, int]:
    """``(text to show, characters hidden)``: the head of ``text`` unless ``full``."""
    if full or len(text) <= cap:
        return text, 0
    return text[:cap], len(text) - cap
