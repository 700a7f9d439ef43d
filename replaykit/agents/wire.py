"""What crosses between replaykit and an outside agent, declared once, as pydantic models: each
request an agent sends a bridge and each answer it gets (``bridge.py``, ``codex/bridge.py``), the
MCP exec server's JSON-RPC (``mcp_exec.py``), the events ``codex exec --json`` prints
(``codex/driver.py``).

A request is parsed with ``parse`` (bad JSON, another shape or a wrong type is
``BadRequest``: one line, answered 400); an answer is written with ``answer`` (compact keys in
declaration order, ``None`` kept where the protocol has it). The chat and Responses bodies
themselves are the endpoint's: ``ChatRequest`` names only what the bridge reads and passes
every other field through unread.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
)
from pydantic import ValidationError as _ValidationError


class BadRequest(Exception):
    """A request the bridge refuses (400): the agent's mistake, not the episode's."""


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ExecRequest(_Wire):
    """``POST /exec``: one command for the task's environment (``env.run``)."""

    command: StrictStr = Field(description="the bash command line to run")
    timeout: StrictFloat | None = Field(
        default=None, description="seconds before the command is stopped (the env's default: absent)"
    )


class ExecAnswer(_Wire):
    """What a command did: the recorded observation."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False


class ExecRefusal(_Wire):
    """The codex bridge's ``/exec`` refusal (a bad body, the episode over): one line."""

    error: str


class ChatRequest(_Wire):
    """``POST /v1/chat/completions``: what the bridge reads of it; every other field is the
    agent's, passed through (``passed``)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    messages: list[dict[str, JsonValue]]
    stream: StrictBool | None = None

    def passed(self, owned: Collection[str]) -> dict[str, JsonValue]:
        """The agent's other fields, those in ``owned`` (the run's) left out, in the agent's order."""
        extra: dict[str, JsonValue] = dict(self.model_extra or {})
        return {k: v for k, v in extra.items() if k not in owned}


class ModelCard(_Wire):
    id: str
    object: str = "model"
    created: int = 0
    owned_by: str = "replaykit"


class ModelList(_Wire):
    """``GET /v1/models``: the run's model."""

    object: str = "list"
    data: list[ModelCard]


class ErrorBody(_Wire):
    message: str
    type: str = "invalid_request_error"
    code: str | None = None


class ErrorAnswer(_Wire):
    """An OpenAI-shaped error (what an agent's client reads on a 4xx/5xx from the bridge)."""

    error: ErrorBody


def error_answer(message: str, kind: str = "invalid_request_error") -> bytes:
    return answer(ErrorAnswer(error=ErrorBody(message=message, type=kind)))


# -- the MCP exec server's JSON-RPC 2.0 (stdio, one message a line) ---------------------------
RpcId = StrictInt | StrictStr | None


class RpcRequest(_Wire):
    """A JSON-RPC request (``id`` set, even to null) or notification (``id`` absent)."""

    jsonrpc: str = "2.0"
    id: RpcId = None
    method: StrictStr = ""
    params: dict[str, JsonValue] | None = None

    @property
    def notification(self) -> bool:
        return "id" not in self.model_fields_set


class RpcResult(_Wire):
    jsonrpc: str = "2.0"
    id: RpcId
    result: dict[str, JsonValue]


class RpcErrorBody(_Wire):
    code: int
    message: str


class RpcError(_Wire):
    jsonrpc: str = "2.0"
    id: RpcId
    error: RpcErrorBody


class TextContent(_Wire):
    type: str = "text"
    text: str


class ToolResult(_Wire):
    """A ``tools/call`` result: one text block."""

    content: list[TextContent]
    isError: bool  # MCP's name


# -- ``codex exec --json``: what the driver reads of its events ---------------------------------
class CodexItem(_Wire):
    type: str = ""
    text: str = ""


class CodexError(_Wire):
    message: str | None = None


class CodexEvent(_Wire):
    """One line of ``codex exec --json`` (fields the driver does not read ignored)."""

    type: str = ""
    item: CodexItem | None = None
    error: CodexError | str | None = None
    message: str | None = None


Request = TypeVar("Request", bound=BaseModel)


def parse(model: type[Request], raw: bytes) -> Request:
    """A request body as ``model``; anything else is one line (``BadRequest``)."""
    try:
        return model.model_validate_json(raw or b"{}")
    except _ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the body"
        if first["type"] == "json_invalid":
            raise BadRequest("the body is not JSON") from None
        if first["type"] == "model_type":
            raise BadRequest("the body must be a JSON object") from None
        raise BadRequest(f"{where!r}: {first['msg']}") from None


def answer(message: BaseModel) -> bytes:
    """An answer's bytes: JSON of the model's fields in declaration order."""
    return message.model_dump_json().encode()


__all__ = [
    "BadRequest",
    "ChatRequest",
    "CodexError",
    "CodexEvent",
    "CodexItem",
    "ErrorAnswer",
    "ErrorBody",
    "ExecAnswer",
    "ExecRefusal",
    "ExecRequest",
    "ModelCard",
    "ModelList",
    "RpcError",
    "RpcErrorBody",
    "RpcRequest",
    "RpcResult",
    "TextContent",
    "ToolResult",
    "answer",
    "error_answer",
    "parse",
]
