"""The ``terminus`` agent: the Terminus-2-like harness template (``replaykit/templates/terminus/``,
one tmux session in the task's container, Terminus-2's JSON keystrokes) under a name, so
``replaykit run CONFIG --agent terminus`` runs it. It needs nothing on the host: tmux runs in the
task's image (the local base images carry it; an image without it is one infra line)."""

from __future__ import annotations

from pathlib import Path

from replaykit.agents.base import NamedAgent

AGENT = NamedAgent(
    name="terminus",
    template=Path(__file__).resolve().parents[1] / "templates" / "terminus",
    description="Terminus-2-like: one tmux session in the task's container, the model answering JSON keystrokes",
)
