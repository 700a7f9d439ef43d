"""The shape of a well-formed 2xx answer from an OpenAI-compatible endpoint.

A 200 can still be no answer: a gateway or a server under load may send an OpenAI error
object (``{"error": {...}}``) with status 200, a Responses API object whose ``status`` is
``failed``, or JSON of another shape entirely (no ``choices``). None of these is a result to
grade or keep: :func:`shape_problem` names what is wrong with a parsed body, and
:func:`event_problem` with one event of a stream (an error event); ``failures.incomplete_answer`` (used by the
in-process stubs and the recording proxy alike) calls them before anything is graded or stored.
Paths not listed here (``/models``, an agent's own routes) are not judged by shape.
"""

from __future__ import annotations

from replaykit.core.records import JSON

SNIPPET = 120

#: path suffix → the list each answer of that endpoint carries (``None``: judged by ``_responses``)
_FIELDS: dict[str, str | None] = {
    "/chat/completions": "choices",
    "/completions": "choices",
    "/embeddings": "data",
    "/messages": "content",
    "/responses": None,
}


def endpoint_of(path: str) -> str | None:
    """The OpenAI-compatible endpoint a request path names (``/chat/completions``, …), or None."""
    bare = path.split("?", 1)[0].rstrip("/")
    return next((suffix for suffix in _FIELDS if bare.endswith(suffix)), None)


def _said(error: JSON) -> str:
    """An error object in a few words: its type or code, and its message."""
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code") or ""
        message = error.get("message") or ""
        text = f"{kind}: {message}" if kind and message else str(kind or message or error)
    else:
        text = str(error)
    return " ".join(text.split())[:SNIPPET]


def error_object(doc: JSON) -> str | None:
    """The error a parsed body carries (OpenAI's ``error``, Anthropic's ``type: error``), in words."""
    if not isinstance(doc, dict):
        return None
    if doc.get("error") not in (None, "", {}):
        return _said(doc["error"])
    if doc.get("type") == "error":
        return _said(doc.get("error") or doc.get("message") or "error")
    return None


def _openai_error(doc: JSON) -> bool:
    """An OpenAI error object proper (``{"error": {"message": …}}``): what marks a failed answer
    on a path that is not an answer endpoint (another API's ``error`` field may mean anything)."""
    error = doc.get("error") if isinstance(doc, dict) else None
    return isinstance(error, dict) and isinstance(error.get("message"), str)


def _responses(doc: dict[str, JSON]) -> str | None:
    if doc.get("status") == "failed":
        return "a Responses API object whose status is failed"
    if not isinstance(doc.get("output"), list):
        return "a Responses API answer with no output list"
    return None


def shape_problem(path: str, status: int, doc: JSON) -> str | None:
    """Why a parsed 2xx body is not an answer of the endpoint ``path`` names (None: it is)."""
    endpoint = endpoint_of(path)
    error = error_object(doc)
    if error and (endpoint is not None or _openai_error(doc)):
        return f"the {status} answer carries an error object ({error})"
    if endpoint is None:
        return None
    if not isinstance(doc, dict):
        return f"the {status} answer is JSON {type(doc).__name__}, not an object"
    field = _FIELDS[endpoint]
    if field is None:
        problem = _responses(doc)
        return f"the {status} answer is {problem}" if problem else None
    items = doc.get(field)
    if not isinstance(items, list) or not items:
        keys = ", ".join(sorted(doc)[:6]) or "none"
        return f"the {status} answer has no {field} (its keys: {keys})"
    return None


def event_problem(event: JSON) -> str | None:
    """Why one ``data:`` event of a 2xx stream says the answer failed (None: it does not): an
    error event, or a Responses stream ending in ``response.failed``. The chunks themselves are
    not judged by shape: what a provider puts beside ``choices`` in a chunk varies."""
    error = error_object(event)
    if error:
        return f"the stream carries an error event ({error})"
    if isinstance(event, dict) and event.get("type") == "response.failed":
        response = event.get("response")
        said = error_object(response) if isinstance(response, dict) else None
        return f"the stream ended with response.failed{f' ({said})' if said else ''}"
    return None
