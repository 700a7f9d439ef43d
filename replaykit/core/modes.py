"""Record modes (vcrpy's words), one enum for every place that takes one.

- ``once``: reuse every episode whose key is stored, record the missing ones;
- ``new_episodes``: the same at episode granularity (existing episodes never re-run);
- ``none``: replay only (a missing cassette is an error naming its key);
- ``all``: re-record everything.

``run``/``train`` take all four; a proxy session and the pytest plugin record one
conversation, so they take ``SESSION_MODES`` (no ``new_episodes``).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from replaykit.core.errors import ConfigError


class RecordMode(StrEnum):
    ONCE = "once"
    NEW_EPISODES = "new_episodes"
    NONE = "none"
    ALL = "all"

    @classmethod
    def parse(cls, value: str, allowed: Iterable[RecordMode] | None = None, what: str = "") -> RecordMode:
        """``value`` as a mode of ``allowed`` (default: every mode); else one line naming them."""
        modes = list(allowed) if allowed is not None else list(cls)
        if value not in [m.value for m in modes]:
            raise ConfigError(
                f"unknown record mode {value!r}{what}; use one of: {', '.join(m.value for m in modes)}"
            )
        return cls(value)


#: the modes of one recorded conversation (a proxy session, a pytest test)
SESSION_MODES: tuple[RecordMode, ...] = (RecordMode.ONCE, RecordMode.NONE, RecordMode.ALL)

#: the same, as an enum of its own (the choices of ``replaykit proxy --record-mode``)
SessionMode = StrEnum("SessionMode", {m.name: m.value for m in SESSION_MODES})  # type: ignore[misc]
