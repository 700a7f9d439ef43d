"""mini-swe-agent 2.4.6, the built-in named agent ``mini-swe-agent``: its own CLI in its own
process (``templates/mini_swe_agent/harness.py``), installed by ``scripts/setup-agents.sh``."""

from __future__ import annotations

from pathlib import Path

from replaykit.agents.base import NamedAgent, Requirement, python_dist

VERSION = "2.4.6"

AGENT = NamedAgent(
    name="mini-swe-agent",
    template=Path(__file__).parent / "templates" / "mini_swe_agent",
    description=f"mini-swe-agent {VERSION}: its own CLI, prompts and loop, beside the task's environment",
    requires=Requirement(
        program="mini",
        install=f"bash scripts/setup-agents.sh (or: pipx install mini-swe-agent=={VERSION})",
        read_version=python_dist("mini-swe-agent"),
    ),
)
