"""vcrpy's response, declared once: as its stubs play and record one (``capture/recorder.py``)
and as a cassette exported for vcrpy holds one (``exchange/vcr_export.py``)."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class VcrStatus(TypedDict):
    code: int
    message: NotRequired[str]


class VcrBody(TypedDict):
    string: bytes | str


class VcrResponse(TypedDict):
    status: VcrStatus
    headers: NotRequired[dict[str, list[str]]]
    body: VcrBody
