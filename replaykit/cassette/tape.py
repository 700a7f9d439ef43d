"""Deprecated: ``replaykit.cassette.tape`` moved to :mod:`replaykit.capture.tape` (removed in 0.2.0)."""

from __future__ import annotations

from replaykit.core.deprecation import moved

moved(__name__)

from replaykit.capture.tape import *  # noqa: E402, F403
from replaykit.capture.tape import Tape  # noqa: E402

__all__ = ["Tape"]
