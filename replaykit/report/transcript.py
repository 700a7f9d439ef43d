"""An episode as a conversation: each call's new messages, the reply, env steps, the grade.

Works on chat completions and Responses API bodies, JSON or streamed (SSE chunks
are joined into one reply). An agent re-sends its whole history on every call;
a transcript shows each call's *new* messages only and says how many it folded.

    turns = transcript(store.get_episode(cassette_id))

Each turn is a plain dict (JSON-ready, ``documents.Turn``) with a ``kind``: ``call`` (one LLM call:
``new`` request messages, ``folded`` count, ``reply`` messages, usage), ``env``
(action, observation, state digest), ``error`` or ``grade``.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar, cast

from replaykit.cassette.backend import RunStore
from replaykit.cassette.events import EnvEvent, Episode, ErrorEvent, GradeEvent, LimitEvent, LlmEvent
from replaykit.cassette.facets import call_facet, ended_by, facet_counts
from replaykit.cassette.streams import join_chat_stream, join_responses_stream, sse_payloads
from replaykit.core.records import JSON
from replaykit.report.documents import (
    CallTurn,
    EpisodeBrief,
    Message,
    Reply,
    ToolCall,
    TranscriptDoc,
    Turn,
)

_T = TypeVar("_T")


def _text(content: Any) -> str:
    """Text of a message content: a string, or a list of parts (text/input_text/output_text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict):
                out.append(
                    str(
                        part.get("text") or part.get("refusal") or ("[" + str(part.get("type", "part")) + "]")
                    )
                )
            else:
                out.append(str(part))
        return "".join(out)
    return json.dumps(content, ensure_ascii=False)


def message(
    role: str,
    content: Any = "",
    tool_calls: list[ToolCall] | None = None,
    tool_call_id: str | None = None,
) -> Message:
    msg: Message = {"role": role, "content": _text(content)}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    if tool_call_id:
        msg["tool_call_id"] = tool_call_id
    return msg


def _chat_tool_calls(calls: Any) -> list[ToolCall]:
    out: list[ToolCall] = []
    for call in calls or []:
        fn = call.get("function") or {}
        out.append(
            {"id": call.get("id") or "", "name": fn.get("name") or "", "arguments": fn.get("arguments") or ""}
        )
    return out


def _responses_items(items: Any) -> list[Message]:
    """Responses API input/output items as messages (tool calls and their outputs included)."""
    if isinstance(items, str):
        return [message("user", items)]
    out: list[Message] = []
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            out.append(message(item.get("role", "user"), item.get("content")))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            args = item.get("arguments", item.get("input", item.get("action", "")))
            args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            call: ToolCall = {
                "id": item.get("call_id") or item.get("id") or "",
                "name": item.get("name") or kind,
                "arguments": args,
            }
            out.append(message("assistant", "", [call]))
        elif kind.endswith("_output"):
            output = item.get("output")
            out.append(
                message(
                    "tool",
                    output if isinstance(output, (str, list)) else json.dumps(output),
                    tool_call_id=item.get("call_id"),
                )
            )
        elif kind == "reasoning":
            summary = " ".join(_text(s.get("text")) for s in item.get("summary") or [] if isinstance(s, dict))
            if summary:
                out.append(message("reasoning", summary))
        else:
            out.append(message("item", json.dumps(item, ensure_ascii=False, sort_keys=True)))
    return out


def request_messages(body: Any) -> list[Message]:
    """The messages a request sends: chat ``messages`` or Responses ``instructions`` + ``input``."""
    if not isinstance(body, dict):
        return [message("raw", json.dumps(body, ensure_ascii=False))]
    if "messages" in body:
        return [
            message(
                m.get("role", "?"),
                m.get("content"),
                _chat_tool_calls(m.get("tool_calls")),
                m.get("tool_call_id"),
            )
            for m in body["messages"]
            if isinstance(m, dict)
        ]
    out: list[Message] = []
    if body.get("instructions"):
        out.append(message("system", body["instructions"]))
    if "input" in body:
        out.extend(_responses_items(body["input"]))
    return out


def parse_response(event: LlmEvent) -> Reply:
    """The reply of one call: ``messages``, ``usage``, ``system_fingerprint``, ``stream``, ``error``."""
    text = event.content.decode("utf-8", "replace")
    streamed = text.lstrip().startswith(("data:", "event:"))
    out: Reply = {
        "status": event.status,
        "stream": streamed,
        "messages": [],
        "usage": None,
        "system_fingerprint": None,
    }
    if streamed:
        payloads = sse_payloads(event.content)
        is_responses = any(
            isinstance(p, dict) and str(p.get("type", "")).startswith("response.") for p in payloads
        )
        doc = join_responses_stream(payloads) if is_responses else join_chat_stream(payloads)
    else:
        try:
            body = json.loads(text) if text.strip() else {}
        except ValueError:
            body = None
        doc = body if isinstance(body, dict) else {"raw": text}
    out["chunks"] = doc.get("chunks", len(event.chunks))
    if event.status >= 400 or "error" in doc:
        err = doc.get("error")
        reason = err.get("message") if isinstance(err, dict) else str(err or "")
        out["error"] = str(reason or "") or text[:500]
    out["usage"] = doc.get("usage")
    out["system_fingerprint"] = doc.get("system_fingerprint")
    out["model"] = doc.get("model")
    if "choices" in doc:
        for choice in doc["choices"] if isinstance(doc["choices"], list) else []:
            msg = (choice.get("message") if isinstance(choice, dict) else None) or {}
            out["messages"].append(
                message("assistant", msg.get("content"), _chat_tool_calls(msg.get("tool_calls")))
            )
    elif "output" in doc:
        out["messages"] = _responses_items(doc.get("output"))
    elif "raw" in doc:
        out["messages"].append(message("raw", doc["raw"]))
    return out


def _same(a: Message, b: Message) -> bool:
    def norm(m: Message) -> tuple[Any, ...]:
        calls = tuple((c.get("name"), c.get("arguments")) for c in m.get("tool_calls") or [])
        return (m["role"], (m.get("content") or "").strip(), calls, m.get("tool_call_id") or "")

    return norm(a) == norm(b)


def _folded(sent: list[Message], history: list[Message]) -> int:
    """How many leading messages of ``sent`` re-send the known history, in order
    (an agent may drop parts of a reply, e.g. the text beside a tool call)."""
    n, at = 0, 0
    for msg in sent:
        found = next((i for i in range(at, len(history)) if _same(msg, history[i])), None)
        if found is None:
            break
        n, at = n + 1, found + 1
    return n


def call_turn(event: LlmEvent, history: list[Message], position: int, number: int) -> CallTurn:
    sent = request_messages(event.body)
    folded = _folded(sent, history)
    reply = parse_response(event)
    body = event.body if isinstance(event.body, dict) else {}
    settings: dict[str, JSON] = {
        k: body[k]
        for k in ("model", "temperature", "seed", "top_p", "stream", "max_tokens", "max_output_tokens")
        if k in body
    }
    return {
        "kind": "call",
        "position": position,
        "call": number,
        "method": event.method,
        "path": event.path,
        "settings": settings,
        "folded": folded,
        "sent": len(sent),
        "new": sent[folded:],
        "reply": reply["messages"],
        "status": reply["status"],
        "stream": reply["stream"],
        "chunks": reply.get("chunks"),
        "usage": reply["usage"],
        "system_fingerprint": reply["system_fingerprint"],
        "error": reply.get("error"),
        "facet": call_facet(event),
    }


#: the default cap on each output (a message, a tool call's arguments, stdout, stderr) in a
#: transcript or a report; ``--output-cap`` changes it, ``cassettes show --full`` lifts it
OUTPUT_CAP = 256 * 1024
#: what a cut text ends with (after how many bytes were cut), naming the command that shows all
CUT_NOTE = "more bytes — `replaykit cassettes show"


def cap_text(text: str, cap: int | None, cassette_id: str = "ID") -> str:
    """``text`` cut to ``cap`` bytes (UTF-8), saying how much more there is and how to see it."""
    if cap is None or len(text) <= cap // 4:  # a quick pass for short text (≤ 4 bytes a character)
        return text
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    head = data[:cap].decode("utf-8", "ignore")
    more = len(data) - len(head.encode("utf-8"))
    return f"{head}\n… {more} {CUT_NOTE} {cassette_id} --transcript --full`"


def _capped(value: _T, cap: int | None, cassette_id: str) -> _T:
    """``value`` with every string in it cut to ``cap`` bytes (the same shape)."""
    return cast(_T, _cut(value, cap, cassette_id))


def _cut(value: object, cap: int | None, cassette_id: str) -> object:
    if isinstance(value, str):
        return cap_text(value, cap, cassette_id)
    if isinstance(value, list):
        return [_cut(v, cap, cassette_id) for v in value]
    if isinstance(value, dict):
        return {k: _cut(v, cap, cassette_id) for k, v in value.items()}
    return value


def transcript(episode: Episode, cap: int | None = OUTPUT_CAP, cassette_id: str | None = None) -> list[Turn]:
    """The episode's turns in order (see the module docstring); every text in them is cut
    to ``cap`` bytes (None: in full), naming the command that shows all of it."""
    turns: list[Turn] = []
    history: dict[str, list[Message]] = {}  # per path: what the next request would re-send
    calls = 0
    for position, event in enumerate(episode.events):
        if isinstance(event, LlmEvent):
            calls += 1
            turn = call_turn(event, history.get(event.path, []), position, calls)
            history[event.path] = request_messages(event.body) + turn["reply"]
            turns.append(turn)
        elif isinstance(event, EnvEvent):
            obs = event.observation
            turns.append(
                {
                    "kind": "env",
                    "position": position,
                    "action": event.action,
                    "exit_code": obs.exit_code,
                    "timed_out": obs.timed_out,
                    "stdout": obs.stdout,
                    "stderr": obs.stderr,
                    "state_digest": event.state_digest,
                }
            )
        elif isinstance(event, (ErrorEvent, LimitEvent)):  # a limit reads as what the harness was told
            turns.append({"kind": "error", "position": position, "message": event.message})
        elif isinstance(event, GradeEvent):
            turns.append({"kind": "grade", "position": position, **event.grade.to_dict()})
    if cap is None:
        return turns
    return [_capped(t, cap, cassette_id or episode.id) for t in turns]  # after folding: history is whole


def episode_summary(cassette_id: str, episode: Episode) -> EpisodeBrief:
    key = episode.key
    return {
        "id": cassette_id,
        "task_id": key.task_id,
        "seed": key.seed,
        "model": key.model.name,
        "harness_sha": key.harness_sha,
        "kind": key.kind,
        "digest": episode.digest,
        "tokens": episode.usage_tokens(),
        "llm_calls": len(episode.llm_events),
        "steps": len(episode.env_events),
        "call_facets": facet_counts(episode.events),
        "ended_by": ended_by(episode.events),
    }


def message_lines(msg: Message) -> list[str]:
    """A message as plain text lines (for diffs and the terminal)."""
    head = msg["role"] + (f" (result of {msg['tool_call_id']})" if msg.get("tool_call_id") else "")
    lines = [f"[{head}]"]
    if msg.get("content"):
        lines.extend(msg["content"].splitlines() or [""])
    for call in msg.get("tool_calls") or []:
        lines.append(f"→ {call['name']}({call['arguments']})")
    return lines


def show_transcript(store: RunStore, cassette_id: str, cap: int | None = OUTPUT_CAP) -> TranscriptDoc:
    """``cassettes show ID --transcript``: the episode's summary and its turns (reads only;
    each output cut to ``cap`` bytes, None: in full)."""
    cid = store.resolve_id("cassettes", cassette_id, what="cassette")
    episode = store.get_episode(cid)
    return {"episode": episode_summary(cid, episode), "turns": transcript(episode, cap, cid)}
