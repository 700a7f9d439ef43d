"""A proposer's model session: its tape and where the model is (real, or offline).

What an agent backend (``train/backends.py``; ``models/codex.py``) is handed for one
proposal episode. In-process clients are intercepted by ``session.cassette()``;
external agents go through the recording proxy bound to the same tape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replaykit.capture.tape import Tape
from replaykit.cassette.scrub import Scrubber


@dataclass
class ProposalSession:
    """One proposer episode: its tape, and where the model is (real or offline)."""

    tape: Tape
    base_url: str  # the real endpoint while recording; an offline address while replaying
    api_key: str
    seed: int
    scrubber: Scrubber = field(default_factory=Scrubber)
    rules: tuple[str, ...] = ()

    @property
    def replaying(self) -> bool:
        return self.tape.replaying

    def cassette(self) -> Any:
        """Context manager intercepting in-process HTTP clients into this tape."""
        from replaykit.capture.recorder import episode_cassette

        return episode_cassette(self.tape.label, self.tape, self.scrubber, self.rules)
