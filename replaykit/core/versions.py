"""Versions of the tools that shape a recording (kept in cassette metadata)."""

from __future__ import annotations

import platform
from functools import lru_cache
from importlib import metadata


@lru_cache(maxsize=1)
def tool_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for dist in ("replaykit", "openai", "vcrpy", "httpx2"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "unknown"
    return versions
