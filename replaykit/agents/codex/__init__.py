"""``--agent codex``: the Codex CLI as an episode's policy, acting only in the task's environment.

``template/harness.py`` is its harness repository (the prompt, the Codex settings, the pinned
Codex version); ``driver.py`` runs ``codex exec`` confined to one MCP tool; ``bridge.py`` carries
its model calls to the episode's client and its commands to ``env.run``.
"""

from __future__ import annotations

from pathlib import Path

from replaykit.agents.base import NamedAgent
from replaykit.agents.codex.driver import CODEX_RULES, CODEX_VERSION, REQUIREMENT

CODEX = NamedAgent(
    name="codex",
    template=Path(__file__).parent / "template",
    description=(
        f"the Codex CLI {CODEX_VERSION} (codex exec): its own shell and patch tools off, its one tool "
        "an MCP run(command) in the task's environment; Responses calls through the episode's client"
    ),
    requires=REQUIREMENT,
    rules=CODEX_RULES,
)
