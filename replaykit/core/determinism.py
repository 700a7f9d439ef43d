"""Determinism controls shared by every part: pins, derived seeds, canonical JSON.

Nothing here reads the wall clock. ``SOURCE_DATE_EPOCH`` is the frozen "now" of
every episode and of every commit replaykit writes.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tarfile

SOURCE_DATE_EPOCH = 1_700_000_000  # 2023-11-14T22:13:20Z, the frozen clock
HOSTNAME = "replaykit"

#: Environment variables pinned for every action an environment runs.
ENV_PINS: dict[str, str] = {
    "PYTHONHASHSEED": "0",
    "TZ": "UTC",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH),
    "HOSTNAME": HOSTNAME,
    "GIT_AUTHOR_NAME": "replaykit",
    "GIT_AUTHOR_EMAIL": "replaykit@localhost",
    "GIT_COMMITTER_NAME": "replaykit",
    "GIT_COMMITTER_EMAIL": "replaykit@localhost",
    "GIT_AUTHOR_DATE": f"@{SOURCE_DATE_EPOCH} +0000",
    "GIT_COMMITTER_DATE": f"@{SOURCE_DATE_EPOCH} +0000",
}

#: how the names of variables holding a credential end: never handed to an outside program
SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")


def pinned_environ(drop_prefixes: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment for an outside program it starts (Codex, …): no credential
    (:data:`SECRET_SUFFIXES`), no variable starting with ``drop_prefixes``, and the pins."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().endswith(SECRET_SUFFIXES) and not k.upper().startswith(drop_prefixes)
    }
    env.update(ENV_PINS)
    return env


def canonical_json(value: Any) -> str:
    """The one canonical JSON text of a value: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def digest_of(value: Any) -> str:
    """sha256 of a value's canonical JSON."""
    return sha256_hex(canonical_json(value))


def derive_seed(*parts: Any) -> int:
    """A 31-bit seed derived from any parts (run seed, task id, step, ...)."""
    return int(sha256_hex(canonical_json([str(p) for p in parts]))[:8], 16) & 0x7FFFFFFF


def normal_tarinfo(info: tarfile.TarInfo, mtime: int = SOURCE_DATE_EPOCH) -> tarfile.TarInfo:
    """A tar member with nothing machine- or time-specific: owner 0, no names, a fixed mtime."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = mtime
    return info


#: Shapes of volatile values, shared by the request matchers and certification's
#: scrubbers (each adds its own boundaries and replacements).
UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
DATE_PATTERN = r"\d{4}-\d{2}-\d{2}"
CLOCK_PATTERN = r"\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
ZONE_PATTERN = r"(?:Z|[+-]\d{2}:?\d{2})"
