"""The ``openai`` agent backend: one chat completion proposes the change (a description and a diff).

Its model calls go through the proposal session's cassette (``session.cassette()``), so a
training replays them offline; the diff in the reply's ```diff block is applied to the worktree.
"""

from __future__ import annotations

import re
from pathlib import Path

from replaykit.models.clients import openai_client
from replaykit.models.session import ProposalSession
from replaykit.train.gitops import apply_diff
from replaykit.train.workspace_tree import Workspace, render_workspace

SYSTEM_PROMPT = (
    "You improve an agent harness (the control loop around a frozen model). Read the brief, then reply with "
    "a one-line description of ONE change, followed by a unified diff in a ```diff fenced block."
)
_DIFF_RE = re.compile(r"```diff\n(.*?)```", re.S)


class OpenAIBackend:
    """A proposer that is one chat completion: the brief in, a description + diff out."""

    kind = "openai"

    def __init__(
        self,
        model: str = "reference-proposer",
        base_url: str = "builtin",
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.0,
    ) -> None:
        self.model, self.base_url, self.api_key_env, self.temperature = (
            model,
            base_url,
            api_key_env,
            temperature,
        )

    def propose(
        self, workdir: Path, brief: str, session: ProposalSession, workspace: Workspace | None = None
    ) -> str:
        """``workspace``: its bounded rendering follows the brief in the request (``render_workspace``)."""
        content = brief if workspace is None else f"{brief}\n\n{render_workspace(workspace.files)}"
        with session.cassette():
            client = openai_client(session.base_url, session.api_key)
            reply = client.chat.completions.create(
                model=self.model,
                temperature=self.temperature,
                seed=session.seed,
                messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}],
            )
        text = reply.choices[0].message.content or ""
        match = _DIFF_RE.search(text)
        if match:
            apply_diff(workdir, match.group(1))
        return text.strip().splitlines()[0] if text.strip() else "(no description)"
