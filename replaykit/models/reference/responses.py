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
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from replaykit.determinism import SOURCE_DATE_EPOCH, digest_of, sha256_hex
from replaykit.models.reference.protocol import (
    ApiError,
    AssistantTurn,
    ChatRequest,
    ToolCall,
    dumps,
    estimate_tokens,
)
from replaykit.models.reference.sse import ARGUMENT_PIECES, CONTENT_PIECES, split_text

NORMALISE_RULES = ("uuids", "timestamps", "codex-session")
BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}
_EXIT_RES = (
    re.compile(r"Process exited with code (-?\d+)"),
    re.compile(r"\bexit[_ ]code\"?\s*[:=]\s*(-?\d+)", re.I),
)
EDIT_PATH = "harness.py"
ProposeEdit = Callable[[str, str], "tuple[str, str] | None"]


@dataclass(frozen=True)
class CommandTool:
    """The client's tool for running a shell command, and how to fill it."""

    name: str
    kind: str  # "cmd" | "command" | "argv" | "patch-function" | "patch-custom"
    login_flag: bool = False

    def arguments(self, command: str) -> str:
        if self.kind == "cmd":
            args: dict[str, Any] = {"cmd": command}
            if self.login_flag:
                args["login"] = False
            return json.dumps(args)
        if self.kind == "argv":
            return json.dumps({"command": ["bash", "-lc", command]})
        return json.dumps({"command": command})


@dataclass(frozen=True)
class ResponsesRequest:
    body: dict[str, Any]
    digest: str
    model: str
    messages: list[dict[str, Any]]
    stream: bool
    seed: int
    tool: CommandTool | None
    patch_tool: CommandTool | None


# -- request -----------------------------------------------------------------------
def normalised_digest(body: dict[str, Any]) -> str:
    from replaykit.capture.matchers import get_rule

    value: Any = body
    for name in NORMALISE_RULES:
        value = get_rule(name)(value)
    return digest_of(value)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        return "\n".join(p for p in parts if isinstance(p, str))
    return "" if content is None else str(content)


def exit_code(output: str) -> int | None:
    for pattern in _EXIT_RES:
        match = pattern.search(output)
        if match:
            return int(match.group(1))
    return None


def tool_result_text(output: str) -> str:
    """A tool output as the simulator reads it: exit code first, failures nudged."""
    code = exit_code(output)
    if code is None:
        return output
    nudge = "\n(the command failed; retry)" if code != 0 else ""
    return f"exit_code: {code}\n{output}{nudge}"


def input_messages(items: Any) -> list[dict[str, Any]]:
    """Responses ``input`` → Chat-style messages (what the simulator reads)."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": str(item.get("role", "user")), "content": _text_of(item.get("content"))})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments") if kind == "function_call" else item.get("input")
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": arguments or ""},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = _text_of(item.get("output"))
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": tool_result_text(output),
                    "raw": output,
                }
            )
    return messages


def command_tool(tools: list[dict[str, Any]]) -> CommandTool | None:
    """The function tool to run commands with: ``exec_command``, ``shell_command``, ``shell``, ``bash``, else any with a command."""
    functions = {
        t["name"]: t for t in tools if t.get("type") == "function" and isinstance(t.get("name"), str)
    }

    def make(name: str) -> CommandTool | None:
        props = (functions[name].get("parameters") or {}).get("properties") or {}
        if "cmd" in props:
            return CommandTool(name, "cmd", login_flag="login" in props)
        if "command" in props:
            return CommandTool(name, "argv" if props["command"].get("type") == "array" else "command")
        return None

    for name in ("exec_command", "shell_command", "shell", "bash", *sorted(functions)):
        if name in functions and (found := make(name)) is not None:
            return found
    return None


def patch_tool(tools: list[dict[str, Any]]) -> CommandTool | None:
    for t in tools:
        if t.get("name") == "apply_patch" and t.get("type") in ("function", "custom"):
            return CommandTool("apply_patch", "patch-function" if t["type"] == "function" else "patch-custom")
    return None


def parse_responses_request(body: dict[str, Any]) -> ResponsesRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "you must provide a model parameter", param="model")
    items = body.get("input")
    if not isinstance(items, (str, list)) or not items:
        raise ApiError(400, "'input' must be a string or a non-empty array", param="input")
    if isinstance(items, list) and not all(isinstance(i, dict) for i in items):
        raise ApiError(400, "'input' items must be objects", param="input")
    if body.get("previous_response_id"):
        raise ApiError(
            400,
            "previous_response_id is not supported here; send the whole input (store=false)",
            param="previous_response_id",
        )
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise ApiError(400, "'tools' must be an array of objects", param="tools")
    if body.get("tool_choice") == "none":
        tools = []
    metadata: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
    seed = body.get("seed", metadata.get("seed", 0))
    try:
        seed = int(seed or 0)
    except (TypeError, ValueError):
        raise ApiError(400, "'seed' must be an integer", param="seed") from None
    return ResponsesRequest(
        body=body,
        digest=normalised_digest(body),
        model=model,
        messages=input_messages(items),
        stream=bool(body.get("stream", False)),
        seed=seed,
        tool=command_tool(tools),
        patch_tool=patch_tool(tools),
    )


# -- file edits ------------------------------------------------------------------
def read_output(raw: str) -> str:
    """The command output inside a tool result (after Codex's ``Output:`` header, or a JSON ``output``)."""
    try:
        doc = json.loads(raw)
        if isinstance(doc, dict) and isinstance(doc.get("output"), str):
            return doc["output"]
    except ValueError:
        pass
    _, sep, rest = raw.partition("Output:\n")
    return rest if sep else raw


def apply_patch_text(path: str, old: str, new: str) -> str:
    """An ``apply_patch`` envelope turning ``old`` into ``new`` (hunks with 3 lines of context)."""
    new_lines = new.splitlines()
    if not old:
        body = [f"*** Add File: {path}"] + ["+" + line for line in new_lines]
    else:
        old_lines = old.splitlines()
        body = [f"*** Update File: {path}"]
        for group in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_grouped_opcodes(
            3
        ):
            body.append("@@")
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    body += [" " + line for line in old_lines[i1:i2]]
                if tag in ("replace", "delete"):
                    body += ["-" + line for line in old_lines[i1:i2]]
                if tag in ("replace", "insert"):
                    body += ["+" + line for line in new_lines[j1:j2]]
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


def shell_heredoc(command: str, text: str) -> str:
    """``command <<'EOF_PATCH'`` … with a delimiter that is not a line of ``text``."""
    delim = "EOF_PATCH"
    while delim in text.splitlines():
        delim += "_"
    return f"{command} <<'{delim}'\n{text.rstrip(chr(10))}\n{delim}"


# -- turns -------------------------------------------------------------------------
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
        read_output(first.get("raw", first["content"]))
        if exit_code(first.get("raw", "")) in (0, None)
        else ""
    )
    proposal = propose_edit(source, brief)
    if proposal is None:
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


# -- rendering ---------------------------------------------------------------------
def _item_id(request: ResponsesRequest, prefix: str, n: int) -> str:
    return f"{prefix}_{sha256_hex(f'{request.digest}:{prefix}:{n}')[:32]}"


def output_items(request: ResponsesRequest, turn: AssistantTurn) -> list[dict[str, Any]]:
    """The completed output items: a message (if any text), then the calls."""
    items: list[dict[str, Any]] = []
    if turn.content:
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": turn.content}
        items.append(
            {
                "id": _item_id(request, "msg", 0),
                "type": "message",
                "status": "completed",
                "content": [part],
                "role": "assistant",
            }
        )
    for n, call in enumerate(turn.tool_calls):
        if (
            request.patch_tool is not None
            and call.name == "apply_patch"
            and request.patch_tool.kind == "patch-custom"
        ):
            items.append(
                {
                    "id": _item_id(request, "ctc", n),
                    "type": "custom_tool_call",
                    "status": "completed",
                    "call_id": call.id,
                    "input": call.arguments,
                    "name": call.name,
                }
            )
        else:
            items.append(
                {
                    "id": _item_id(request, "fc", n),
                    "type": "function_call",
                    "status": "completed",
                    "arguments": call.arguments,
                    "call_id": call.id,
                    "name": call.name,
                }
            )
    return items


def usage(request: ResponsesRequest, turn: AssistantTurn) -> dict[str, Any]:
    prompt = estimate_tokens(dumps(request.messages).decode())
    completion = estimate_tokens(
        (turn.content or "") + "".join(c.name + c.arguments for c in turn.tool_calls)
    )
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def response_object(request: ResponsesRequest, turn: AssistantTurn, done: bool) -> dict[str, Any]:
    body = request.body
    return {
        "id": f"resp_{request.digest[:32]}",
        "object": "response",
        "created_at": SOURCE_DATE_EPOCH,
        "status": "completed" if done else "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": body.get("max_output_tokens"),
        "model": request.model,
        "output": output_items(request, turn) if done else [],
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": bool(body.get("store", False)),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": usage(request, turn) if done else None,
        "user": None,
        "metadata": {},
    }


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    ref = {"item_id": item["id"], "output_index": index}
    events: list[dict[str, Any]] = []
    if item["type"] == "message":
        text = item["content"][0]["text"]
        empty = dict(item, status="in_progress", content=[])
        part = dict(item["content"][0], text="")
        events.append({"type": "response.output_item.added", "output_index": index, "item": empty})
        events.append({"type": "response.content_part.added", **ref, "content_index": 0, "part": part})
        for piece in split_text(text, CONTENT_PIECES):
            events.append(
                {
                    "type": "response.output_text.delta",
                    **ref,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                }
            )
        events.append(
            {"type": "response.output_text.done", **ref, "content_index": 0, "text": text, "logprobs": []}
        )
        events.append(
            {"type": "response.content_part.done", **ref, "content_index": 0, "part": item["content"][0]}
        )
    elif item["type"] == "function_call":
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": dict(item, status="in_progress", arguments=""),
            }
        )
        for piece in split_text(item["arguments"], ARGUMENT_PIECES):
            events.append({"type": "response.function_call_arguments.delta", **ref, "delta": piece})
        events.append(
            {
                "type": "response.function_call_arguments.done",
                **ref,
                "name": item["name"],
                "arguments": item["arguments"],
            }
        )
    else:
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": dict(item, status="in_progress", input=""),
            }
        )
        for piece in split_text(item["input"], ARGUMENT_PIECES):
            events.append({"type": "response.custom_tool_call_input.delta", **ref, "delta": piece})
        events.append({"type": "response.custom_tool_call_input.done", **ref, "input": item["input"]})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def stream_events(request: ResponsesRequest, turn: AssistantTurn) -> list[bytes]:
    """Every SSE event of a streamed response, ``response.completed`` last."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object(request, turn, False)},
        {"type": "response.in_progress", "response": response_object(request, turn, False)},
    ]
    for index, item in enumerate(output_items(request, turn)):
        events.extend(_item_events(index, item))
    events.append({"type": "response.completed", "response": response_object(request, turn, True)})
    out = []
    for n, event in enumerate(events):
        event = {
            "type": event["type"],
            "sequence_number": n,
            **{k: v for k, v in event.items() if k != "type"},
        }
        out.append(b"event: " + event["type"].encode("ascii") + b"\ndata: " + dumps(event) + b"\n\n")
    return out


def respond(body: dict[str, Any], models: Mapping[str, Any]) -> tuple[bool, Any]:
    """``(True, sse_events)`` for a streamed request, else ``(False, response_json)``."""
    request = parse_responses_request(body)
    turn = turn_for(request, models)
    if request.stream:
        return True, stream_events(request, turn)
    return False, response_object(request, turn, True)
