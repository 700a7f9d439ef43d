"""A ``POST /v1/responses`` request, read into what the simulator understands.

``input`` items (messages, ``function_call`` / ``function_call_output``, custom tool
calls) become Chat-style messages; a tool output's exit code (``Process exited with
code N``, ``Exit code: N``, ``"exit_code": N``) is rewritten as ``exit_code: N`` and a
failure gets a retry nudge; the client's tools are reduced to the one that runs a
shell command (:class:`CommandTool`) and ``apply_patch``. The request's digest is
taken after the Codex normalisation rules (UUIDs, timestamps, session paths).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from replaykit.core.determinism import digest_of
from replaykit.core.records import JSON
from replaykit.models.reference.protocol import ApiError, objects, schema_properties

NORMALISE_RULES = ("uuids", "timestamps", "codex-session")
_EXIT_RES = (
    re.compile(r"Process exited with code (-?\d+)"),
    re.compile(r"\bexit[_ ]code\"?\s*[:=]\s*(-?\d+)", re.I),
)


@dataclass(frozen=True)
class CommandTool:
    """The client's tool for running a shell command, and how to fill it."""

    name: str
    kind: str  # "cmd" | "command" | "argv" | "patch-function" | "patch-custom"
    login_flag: bool = False
    namespace: str | None = (
        None  # a tool inside a ``namespace`` tool (Codex: an MCP server's, ``mcp__<server>``)
    )

    def arguments(self, command: str) -> str:
        if self.kind == "cmd":
            args: dict[str, str | bool] = {"cmd": command}
            if self.login_flag:
                args["login"] = False
            return json.dumps(args)
        if self.kind == "argv":
            return json.dumps({"command": ["bash", "-lc", command]})
        return json.dumps({"command": command})


class CalledFunction(TypedDict):
    name: JSON
    arguments: JSON  # the item's ``arguments`` (``input`` of a custom tool call), as sent


class CallOfMessage(TypedDict):
    """A ``function_call`` / ``custom_tool_call`` item as a Chat-style tool call."""

    id: JSON  # the item's ``call_id``
    type: str
    function: CalledFunction


class ChatStyleMessage(TypedDict):
    """An ``input`` item as the Chat-style message the simulator reads."""

    role: str
    content: str | None
    tool_calls: NotRequired[list[CallOfMessage]]
    tool_call_id: NotRequired[JSON]
    raw: NotRequired[str]  # a tool output as sent, before its exit code is rewritten


@dataclass(frozen=True)
class ResponsesRequest:
    body: dict[str, JSON]
    digest: str
    model: str
    messages: list[ChatStyleMessage]
    stream: bool
    seed: int
    tool: CommandTool | None
    patch_tool: CommandTool | None


def normalised_digest(body: Mapping[str, JSON]) -> str:
    from replaykit.capture.matchers import get_rule

    value: object = body
    for name in NORMALISE_RULES:
        value = get_rule(name)(value)
    return digest_of(value)


def _text_of(content: object) -> str:
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


def input_messages(items: str | Sequence[Mapping[str, JSON]]) -> list[ChatStyleMessage]:
    """Responses ``input`` → Chat-style messages (what the simulator reads)."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    messages: list[ChatStyleMessage] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": str(item.get("role", "user")), "content": _text_of(item.get("content"))})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments") if kind == "function_call" else item.get("input")
            call: CallOfMessage = {
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


def _namespaced(tools: Sequence[Mapping[str, JSON]]) -> list[tuple[str, Mapping[str, JSON]]]:
    """The function tools inside ``namespace`` tools, with their namespace, in the order sent."""
    found: list[tuple[str, Mapping[str, JSON]]] = []
    for t in tools:
        inner = objects(t.get("tools") or []) if t.get("type") == "namespace" else None
        if inner is not None and isinstance(space := t.get("name"), str):
            found += [(space, f) for f in inner if f.get("type") == "function"]
    return found


def _command_tool_of(name: str, parameters: JSON | None, namespace: str | None = None) -> CommandTool | None:
    props = schema_properties(parameters)
    if "cmd" in props:
        return CommandTool(name, "cmd", login_flag="login" in props, namespace=namespace)
    if "command" in props:
        command = props["command"]
        array = isinstance(command, Mapping) and command.get("type") == "array"
        return CommandTool(name, "argv" if array else "command", namespace=namespace)
    return None


def command_tool(tools: Sequence[Mapping[str, JSON]]) -> CommandTool | None:
    """The function tool to run commands with: ``exec_command``, ``shell_command``, ``shell``, ``bash``,
    else any with a command, else one inside a namespace (a Codex MCP server's ``run``)."""
    functions = {
        name: t for t in tools if t.get("type") == "function" and isinstance(name := t.get("name"), str)
    }
    for name in ("exec_command", "shell_command", "shell", "bash", *sorted(functions)):
        if name in functions and (found := _command_tool_of(name, functions[name].get("parameters"))):
            return found
    for space, tool in _namespaced(tools):
        name = tool.get("name")
        if isinstance(name, str) and (found := _command_tool_of(name, tool.get("parameters"), space)):
            return found
    return None


def patch_tool(tools: Sequence[Mapping[str, JSON]]) -> CommandTool | None:
    for t in tools:
        if t.get("name") == "apply_patch" and t.get("type") in ("function", "custom"):
            return CommandTool("apply_patch", "patch-function" if t["type"] == "function" else "patch-custom")
    return None


def parse_responses_request(body: dict[str, JSON]) -> ResponsesRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "you must provide a model parameter", param="model")
    raw_items = body.get("input")
    if not isinstance(raw_items, (str, list)) or not raw_items:
        raise ApiError(400, "'input' must be a string or a non-empty array", param="input")
    items = raw_items if isinstance(raw_items, str) else objects(raw_items)
    if items is None:
        raise ApiError(400, "'input' items must be objects", param="input")
    if body.get("previous_response_id"):
        raise ApiError(
            400,
            "previous_response_id is not supported here; send the whole input (store=false)",
            param="previous_response_id",
        )
    tools = objects(body.get("tools") or [])
    if tools is None:
        raise ApiError(400, "'tools' must be an array of objects", param="tools")
    if body.get("tool_choice") == "none":
        tools = []
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    raw_seed = body.get("seed", metadata.get("seed", 0)) or 0
    bad_seed = ApiError(400, "'seed' must be an integer", param="seed")
    if not isinstance(raw_seed, (int, float, str)):
        raise bad_seed
    try:
        seed = int(raw_seed)
    except ValueError:
        raise bad_seed from None
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


def read_output(raw: str) -> str:
    """The command output inside a tool result (after Codex's ``Output:`` header, or a JSON ``output``)."""
    try:
        doc = json.loads(raw)
        output = doc.get("output") if isinstance(doc, dict) else None
        if isinstance(output, str):
            return output
    except ValueError:
        pass
    _, sep, rest = raw.partition("Output:\n")
    return rest if sep else raw
