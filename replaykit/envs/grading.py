"""Deprecated: ``replaykit.envs.grading`` moved to :mod:`replaykit.envs.verifier` (removed in 0.2.0)."""

from __future__ import annotations

from replaykit.core.deprecation import moved

moved(__name__)

from replaykit.envs.verifier import *  # noqa: E402, F403
from replaykit.envs.verifier import oracle_grades  # noqa: E402

__all__ = ["oracle_grades"]
