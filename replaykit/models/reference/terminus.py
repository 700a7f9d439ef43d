"""The Terminus JSON shape: how a simulated task model answers a Terminus-2-like harness.

A conversation is in this shape when one of its messages asks for JSON answers naming
``"keystrokes"`` and ``"task_complete"`` (Terminus-2's prompt, the ``terminus`` harness
template's). The model then answers each turn with one JSON object: its next step as one
command, ``{"keystrokes": "<command>\\n", "duration": 5.0}`` (a multi-line step typed as
``bash -c '<script>'``, so a ``set -e`` or ``exit`` in it never ends the terminal's shell), and
``"task_complete": true`` with no command once every step is done (a harness that asks for a
confirmation gets the same answer again). Progress is read from the conversation: each
assistant answer that parses as JSON with a non-empty ``commands`` array, followed by a user
message, is one executed step and that message its result (an answer that did not parse ran
nothing). The exit code of a result is its **last** ``exit code N`` match (a terminal screen
shows the newest prompt last; none ⇒ 0) and a ``retry`` in it is a nudge, as for tool results.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence

from replaykit.models.reference.protocol import AssistantTurn, message_text

MARKERS = ('"keystrokes"', '"task_complete"')
#: what every command asks to wait at most: a harness that returns at the next prompt waits less
DURATION = 5.0


def applies(messages: Sequence[Mapping[str, object]]) -> bool:
    """A system or user message asks for Terminus JSON answers."""
    return any(
        m.get("role") in ("system", "user") and all(k in message_text(m) for k in MARKERS) for m in messages
    )


def _commands(text: str) -> list[object]:
    """The ``commands`` of an answer that is one JSON object (else [])."""
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start : end + 1]) if 0 <= start < end else None
    except ValueError:
        return []
    commands = data.get("commands") if isinstance(data, dict) else None
    return commands if isinstance(commands, list) else []


def step_results(messages: Sequence[Mapping[str, object]]) -> list[str]:
    """The result (the next user message) of each answer that ran commands, in order."""
    results = []
    for i, message in enumerate(messages[:-1]):
        after = messages[i + 1]
        if (
            message.get("role") == "assistant"
            and after.get("role") == "user"
            and _commands(message_text(message))
        ):
            results.append(message_text(after))
    return results


def _answer(analysis: str, plan: str, commands: list[dict[str, object]], complete: bool) -> AssistantTurn:
    body = {"analysis": analysis, "plan": plan, "commands": commands, "task_complete": complete}
    return AssistantTurn(content=json.dumps(body, indent=2))


def step_turn(command: str, prose: str) -> AssistantTurn:
    """The answer running one step."""
    keys = f"bash -c {shlex.quote(command)}" if "\n" in command else command
    return _answer(prose, f"Run `{command}`.", [{"keystrokes": keys + "\n", "duration": DURATION}], False)


def done_turn(text: str) -> AssistantTurn:
    """The answer once every step ran: complete, no command."""
    return _answer(text, "The task is complete.", [], True)
