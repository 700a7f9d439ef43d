"""mini-swe-agent's ``mini`` for the named-agent tests: ``scripts/setup-agents.sh`` installs it
(scripts/test.sh runs that and exports ``REPLAYKIT_AGENTS_PATH``). Its absence fails the test;
``REPLAYKIT_ALLOW_AGENT_SKIP=1`` skips instead, never under CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replaykit.agents.base import AGENTS_PATH_VAR
from replaykit.agents.registry import get_agent

DEFAULT_BIN = Path.home() / ".cache" / "replaykit" / "agents" / "bin"


@pytest.fixture(scope="session")
def mini_path() -> str:
    """The ``REPLAYKIT_AGENTS_PATH`` that finds ``mini`` (also set in this process)."""
    path = os.environ.get(AGENTS_PATH_VAR) or str(DEFAULT_BIN)
    os.environ[AGENTS_PATH_VAR] = path
    requirement = get_agent("mini-swe-agent").requires
    assert requirement is not None
    if requirement.find() is None:
        if os.environ.get("REPLAYKIT_ALLOW_AGENT_SKIP") == "1" and not os.environ.get("CI"):
            pytest.skip("mini-swe-agent is not installed (bash scripts/setup-agents.sh)")
        pytest.fail(
            f"mini-swe-agent's `mini` is not on {AGENTS_PATH_VAR}={path} or PATH: run bash scripts/setup-agents.sh",
            pytrace=False,
        )
    return path
