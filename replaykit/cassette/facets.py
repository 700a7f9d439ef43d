"""Every model call classified from its bytes: a *facet*, derived on read, never stored.

``call_facet(event)`` reads one recorded ``llm`` event (its request and the response bytes,
streamed chat chunks and Responses API events joined: ``streams.py``) and says what the answer
was, the first that holds of:

- ``length``: cut at the token limit (``finish_reason: "length"``; a Responses answer
  ``incomplete`` for ``max_output_tokens``);
- ``refusal``: the model refused (a ``refusal`` in the message, ``finish_reason:
  "content_filter"``, a Responses ``refusal`` part or ``content_filter`` cut);
- ``malformed_tool_call``: a tool call whose arguments are not a JSON object, or that names no
  tool the request offered;
- ``tool_calls``: well-formed tool calls;
- ``stop``: text;
- ``reasoning_only``: nothing but reasoning (``reasoning_content`` / ``reasoning``, a Responses
  ``reasoning`` item): no text, no call;
- ``empty``: nothing at all.

An answer that is no answer (an HTTP error, a body that is not JSON) has no facet (None): it is
an infrastructure failure, and the episode says so. Old cassettes get facets too: nothing here
was recorded for it. ``ended_by(events)``: the facet of the call that ended an episode, when it
went wrong (one of :data:`WRONG`) and no action followed it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from replaykit.cassette.backend import EpisodeStore
from replaykit.cassette.events import EnvEvent, Event, LlmEvent
from replaykit.cassette.streams import join_chat_stream, join_responses_stream, sse_payloads
from replaykit.core.records import JSON

#: every facet, in the order counts are shown
FACETS = ("tool_calls", "stop", "length", "empty", "reasoning_only", "malformed_tool_call", "refusal")
#: the facets of a call that went wrong
WRONG = ("length", "empty", "reasoning_only", "malformed_tool_call", "refusal")


def answer_of(event: LlmEvent) -> dict[str, JSON] | None:
    """The reply as one JSON object (a stream joined), or None for no answer."""
    if event.status >= 400:
        return None
    text = event.content.decode("utf-8", "replace")
    if text.lstrip().startswith(("data:", "event:")):
        payloads = sse_payloads(event.content)
        responses = any(
            isinstance(p, dict) and str(p.get("type", "")).startswith("response.") for p in payloads
        )
        return join_responses_stream(payloads) if responses else join_chat_stream(payloads)
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and "error" not in doc else None


def offered_tools(body: Any) -> set[str] | None:
    """The tool names a request offered (a function's, a Responses tool's, a namespace's
    members'); None when it offered none."""
    tools = body.get("tools") if isinstance(body, Mapping) else None
    if not isinstance(tools, list) or not tools:
        return None
    names: set[str] = set()
    stack: list[Any] = list(tools)
    while stack:
        tool = stack.pop()
        if not isinstance(tool, Mapping):
            continue
        for holder in (tool, tool.get("function")):
            if isinstance(holder, Mapping) and isinstance(holder.get("name"), str):
                names.add(holder["name"])
        if isinstance(tool.get("type"), str):
            names.add(tool["type"])  # a built-in tool (local_shell, web_search, …) is called by its type
        stack.extend(tool.get("tools") or [])
    return names


def _call_ok(name: Any, arguments: Any, offered: set[str] | None) -> bool:
    if not isinstance(name, str) or offered is None or name not in offered:
        return False
    if arguments is None:
        return True
    try:
        return isinstance(json.loads(arguments) if isinstance(arguments, str) else arguments, dict)
    except ValueError:
        return False


def _calls_facet(calls: Sequence[tuple[Any, Any]], offered: set[str] | None) -> str | None:
    if not calls:
        return None
    return "tool_calls" if all(_call_ok(n, a, offered) for n, a in calls) else "malformed_tool_call"


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _chat_facet(doc: Mapping[str, Any], offered: set[str] | None) -> str | None:
    choices = doc.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else None
    if choice is None:
        return None
    found = choice.get("message")
    msg: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    finish = choice.get("finish_reason") or doc.get("finish_reason")
    if finish == "length":
        return "length"
    if _text(msg.get("refusal")) or finish == "content_filter":
        return "refusal"
    listed = msg.get("tool_calls")
    raw: list[Any] = listed if isinstance(listed, list) else []
    fns = [c.get("function") if isinstance(c, Mapping) else None for c in raw]
    calls = [(f.get("name"), f.get("arguments")) if isinstance(f, Mapping) else (None, None) for f in fns]
    return _calls_facet(calls, offered) or _text_facet(msg.get("content"), msg)


def _text_facet(content: Any, msg: Mapping[str, Any]) -> str:
    parts = content if isinstance(content, list) else [content]
    if any(_text(p.get("text") if isinstance(p, Mapping) else p) for p in parts):
        return "stop"
    reasoning = _text(msg.get("reasoning_content")) or _text(msg.get("reasoning"))
    return "reasoning_only" if reasoning or msg.get("reasoning_details") else "empty"


def _responses_facet(doc: Mapping[str, Any], offered: set[str] | None) -> str:
    details = doc.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, Mapping) else None
    if doc.get("status") == "incomplete" and reason == "max_output_tokens":
        return "length"
    items = [i for i in doc.get("output") or [] if isinstance(i, Mapping)]
    parts = [
        p
        for i in items
        if i.get("type") == "message"
        for p in i.get("content") or []
        if isinstance(p, Mapping)
    ]
    if reason == "content_filter" or any(p.get("type") == "refusal" for p in parts):
        return "refusal"
    calls = [  # a built-in tool's call (``local_shell_call``) names the tool by its type
        (
            i.get("name") or str(i.get("type"))[: -len("_call")],
            i.get("arguments") if i.get("type") == "function_call" else None,
        )
        for i in items
        if str(i.get("type", "")).endswith("_call")
    ]
    found = _calls_facet(calls, offered)
    if found:
        return found
    if any(_text(p.get("text")) for p in parts):
        return "stop"
    return "reasoning_only" if any(i.get("type") == "reasoning" for i in items) else "empty"


def call_facet(event: LlmEvent) -> str | None:
    """One call's facet (see the module doc); None when the answer was no answer."""
    doc = answer_of(event)
    if doc is None:
        return None
    offered = offered_tools(event.body)
    if "choices" in doc:
        return _chat_facet(doc, offered)
    if "output" in doc or doc.get("object") == "response":
        return _responses_facet(doc, offered)
    return None


def facet_counts(events: Iterable[Event]) -> dict[str, int]:
    """How many of an episode's calls had each facet (only those it had), in :data:`FACETS` order."""
    seen = [f for e in events if isinstance(e, LlmEvent) and (f := call_facet(e))]
    return {f: seen.count(f) for f in FACETS if f in seen}


def ended_by(events: Sequence[Event]) -> str | None:
    """The facet of the episode's last call when it went wrong and no action followed it."""
    for event in reversed(events):
        if isinstance(event, EnvEvent):
            return None
        if isinstance(event, LlmEvent):
            facet = call_facet(event)
            return facet if facet in WRONG else None
    return None


def moved(before: Mapping[str, int], after: Mapping[str, int]) -> str:
    """``length 14 → 2 · empty 0 → 3``: the facets of calls that went wrong whose counts moved."""
    return " · ".join(
        f"{f} {before.get(f, 0)} → {after.get(f, 0)}" for f in WRONG if before.get(f, 0) != after.get(f, 0)
    )


def run_facets(store: EpisodeStore, cassette_ids: Iterable[str]) -> dict[str, int]:
    """The facet counts of these episodes' calls together (each episode decoded, verified)."""
    total: dict[str, int] = {}
    for cid in cassette_ids:
        for facet, n in facet_counts(store.get_episode(cid).events).items():
            total[facet] = total.get(facet, 0) + n
    return {f: total[f] for f in FACETS if f in total}
