"""The Responses API (``POST /v1/responses``) of the reference server.

The same simulated models as Chat Completions, reached through another wire
format — enough to drive the Codex CLI through a short task:

* ``input`` (messages, ``function_call`` / ``function_call_output`` items) becomes
  Chat-style messages; a task model (the registry in ``server.build_models``)
  chooses the next turn exactly as it does for ``/v1/chat/completions``.
* The solution step becomes a call of the client's command tool, in that tool's
  shape: ``exec_command`` ``{"cmd": …}``, ``shell`` ``{"command": ["bash", "-lc", …]}``,
  or any function with a ``command``/``cmd`` parameter.
* A tool output's exit code (``Process exited with code N``, ``Exit code: N``,
  ``"exit_code": N``) is rewritten as ``exit_code: N``; Codex never sends a retry
  nudge, so a failed command is treated as *noticed* and the step is retried.
* A model whose registry handler has a ``propose_edit(source, brief)`` method (or
  ``reference-proposer``, via ``replaykit.models.reference.proposer.propose_edit``)
  acts as a proposer: it reads ``harness.py``, edits it with one ``apply_patch``
  call (``propose_edit(source, brief) -> (new_source, description) | None``), then
  answers with the description.

Every id derives from the digest of the request body *after* the Codex
normalisation rules (UUIDs, timestamps, session paths), so two runs of the same
Codex task get byte-identical responses. Streaming is SSE (``event:`` + ``data:``),
one HTTP chunk per event, with ``sequence_number``s; ``response.completed`` carries
``usage``.

Modules: ``responses_request`` (parsing), ``responses_turns`` (task and proposer
turns), ``patches`` (``apply_patch`` text), ``responses_render`` (JSON and SSE).
"""

from __future__ import annotations

from typing import Any, Mapping

from replaykit.core.records import JSON
from replaykit.models.reference.responses_render import response_object, stream_events
from replaykit.models.reference.responses_request import parse_responses_request
from replaykit.models.reference.responses_turns import turn_for


def respond(body: dict[str, JSON], models: Mapping[str, Any]) -> list[bytes] | dict[str, object]:
    """The SSE events of a streamed request, else the response object."""
    request = parse_responses_request(body)
    turn = turn_for(request, models)
    if request.stream:
        return stream_events(request, turn)
    return response_object(request, turn, True)
