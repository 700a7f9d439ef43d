"""The next assistant turn of a Responses request.

A task model (the registry in ``server.build_models``) chooses the turn exactly as
for ``/v1/chat/completions``; its ``bash`` call is re-shaped for the client's command
tool. A model with a ``propose_edit(source, brief)`` method (or
``reference-proposer``) acts as a proposer instead: it reads ``harness.py``, edits it
with one ``apply_patch`` call, then answers with the change's description — one step
per turn, read back from the conversation (stateless).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Mapping

from replaykit.core.determinism import sha256_hex
from replaykit.models.reference.patches import apply_patch_text, shell_heredoc
from replaykit.models.reference.protocol import ApiError, AssistantTurn, ChatRequest, ToolCall
from replaykit.models.reference.responses_request import ResponsesRequest, exit_code, read_output

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionToolParam

BASH_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}
EDIT_PATH = "harness.py"
ProposeEdit = Callable[[str, str], "tuple[str, str] | None"]


def proposer_edit_fn(model: str, handler: Any) -> ProposeEdit | None:
    fn = getattr(handler, "propose_edit", None)
    if fn is None and model == "reference-proposer":
        try:
            from replaykit.models.reference.proposer import propose_edit as fn
        except ImportError:
            return None
    return fn


def task_turn(request: ResponsesRequest, handler: Callable[[ChatRequest], AssistantTurn]) -> AssistantTurn:
    """Ask a Chat-style model for the next turn; re-shape its ``bash`` call for the client's tool."""
    chat = ChatRequest(
        body={"model": request.model, "messages": request.messages},
        digest=request.digest,
        model=request.model,
        messages=request.messages,
        tools=[BASH_TOOL] if request.tool else [],
        stream=request.stream,
        seed=request.seed,
    )
    turn = handler(chat)
    if not turn.tool_calls or request.tool is None:
        return turn
    calls = []
    for call in turn.tool_calls:
        try:
            command = json.loads(call.arguments)["command"]
        except (ValueError, KeyError, TypeError):
            command = call.arguments
        calls.append(ToolCall(call.id, request.tool.name, request.tool.arguments(str(command))))
    return AssistantTurn(turn.content, tuple(calls), turn.finish_reason)


def _call_id(request: ResponsesRequest, n: int) -> str:
    return f"call_{sha256_hex(f'{request.digest}:tool:{n}')[:24]}"


def proposer_turn(request: ResponsesRequest, propose_edit: ProposeEdit) -> AssistantTurn:
    """Read the file, patch it, report: one step per turn, stateless (from the conversation)."""
    users = [
        m for m in request.messages if m["role"] == "user" and not str(m["content"]).lstrip().startswith("<")
    ]
    brief = str(users[-1]["content"]) if users else ""
    path = EDIT_PATH
    calls = [m for m in request.messages if m.get("tool_calls")]
    outputs = [m for m in request.messages if m["role"] == "tool"]
    if request.tool is None:
        return AssistantTurn(content="I need a shell tool to read and edit files, and none was offered.")
    if not calls:
        read = ToolCall(_call_id(request, 0), request.tool.name, request.tool.arguments(f"cat {path}"))
        return AssistantTurn(
            content=f"I'll read `{path}` first.", tool_calls=(read,), finish_reason="tool_calls"
        )
    if not outputs:
        return AssistantTurn(content=f"I could not read `{path}`.")
    first = outputs[0]
    source = (
        read_output(first.get("raw", first["content"] or ""))
        if exit_code(first.get("raw", "")) in (0, None)
        else ""
    )
    proposal = propose_edit(source, brief)
    if proposal is None:
        from replaykit.models.reference import proposer

        if propose_edit is proposer.propose_edit and not proposer.quickstart_shaped(source):
            return AssistantTurn(content=proposer.FOREIGN)  # the reference one says what it knows
        return AssistantTurn(content="No further proposals: every change I know was tried or does not apply.")
    new_source, description = proposal
    if len(calls) >= 2 or new_source == source:
        return AssistantTurn(content=description if new_source != source else f"No change: {description}")
    patch = apply_patch_text(path, source, new_source)
    tool = request.patch_tool
    if tool is not None:
        arguments = json.dumps({"input": patch}) if tool.kind == "patch-function" else patch
        call = ToolCall(_call_id(request, 1), tool.name, arguments)
    else:
        call = ToolCall(
            _call_id(request, 1),
            request.tool.name,
            request.tool.arguments(shell_heredoc("apply_patch", patch)),
        )
    return AssistantTurn(
        content=f"Editing `{path}`: {description}", tool_calls=(call,), finish_reason="tool_calls"
    )


def turn_for(request: ResponsesRequest, models: Mapping[str, Any]) -> AssistantTurn:
    handler = models.get(request.model)
    if handler is None:
        raise ApiError(
            404,
            f"The model `{request.model}` does not exist or you do not have access to it.",
            param="model",
            code="model_not_found",
        )
    edit = proposer_edit_fn(request.model, handler)
    if edit is not None:
        return proposer_turn(request, edit)
    return task_turn(request, handler)
