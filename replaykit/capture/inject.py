"""Messages given to the model at a fork's step (``replaykit fork --message FILE``).

From model call ``step`` on, every chat request the harness sends gets one more user
message, at the place the step's request ended: the model sees it at the step and in the
history of every later call, the harness never does (its own message list is unchanged).
A fork of such a fork keeps its parent's messages before its own step. The rewrite is part
of the fork's recording (``meta["fork"]``): a replay applies it again, so the harness's
requests match the recorded ones.
"""

from __future__ import annotations

import json

from replaykit.core.meta import ForkMeta


class InjectMessages:
    """Rewrites request bodies: ``messages`` is ``(step, text)`` in order; ``calls`` says how
    many model calls were made before this one (a body it cannot add a message to is a
    ``ValueError``: the tape's divergence)."""

    @classmethod
    def of(cls, fork: ForkMeta | None) -> InjectMessages | None:
        """A fork's messages, each added to every request from its step on (None: none given)."""
        messages = fork["messages"] if fork else []
        return cls([(m["step"], m["text"]) for m in messages]) if messages else None

    def __init__(self, messages: list[tuple[int, str]]) -> None:
        self.messages = messages
        self.index: dict[int, int] = {}  # message -> where it sits in ``messages`` (set at its step)

    def __call__(self, body: bytes, calls: int) -> bytes:
        due = [(i, text) for i, (step, text) in enumerate(self.messages) if calls >= step]
        if not due:
            return body
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        messages = doc.get("messages") if isinstance(doc, dict) else None
        if not isinstance(messages, list):
            raise ValueError(
                f"--message: the request at step {calls} has no chat messages list to add the message to "
                "(only chat completions requests take one)"
            )
        for i, text in due:
            at = self.index.setdefault(i, len(messages))
            messages.insert(min(at, len(messages)), {"role": "user", "content": text})
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
