"""Endpoint failures are infrastructure failures, never task results.

An HTTP error from a model endpoint (any 4xx/5xx), a refused connection, a
timeout (``model.timeout_s`` is a total deadline per call), a body cut before its
end, an SSE stream cut before its terminal event, a 2xx answer that does not parse, or one
that carries an error object or has the wrong shape (:func:`incomplete_answer`, ``shapes.py``) says nothing about the harness or the task: such an exchange is never
stored as a graded episode and never reused. While recording, the rollout and the
trainer ask :func:`endpoint_failure` whether the tape saw one; the run then stops
with one line naming the endpoint, the status and the fix (or, with
``--keep-going``, the episode is kept as an *infra* failure, which is re-recorded
on the next run). Cassettes stored by older versions with an endpoint error are
recognised by :func:`stored_endpoint_failure` and re-recorded too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from replaykit.capture.shapes import event_problem, shape_problem
from replaykit.cassette.events import Event, LlmEvent
from replaykit.core.errors import ModelError
from replaykit.core.records import JSON

BODY_SNIPPET = 160
#: ``model.timeout_s``'s default: the total time one model call may take, retries not included
DEFAULT_TIMEOUT_S = 120.0
#: paths whose 2xx answers must be JSON (or an SSE stream): what OpenAI-compatible endpoints serve
_JSON_PATHS = ("/chat/completions", "/completions", "/responses", "/embeddings", "/messages")
#: the events that end a Responses API stream (chat completions streams end with ``data: [DONE]``)
_TERMINAL_EVENTS = frozenset({"response.completed", "response.failed", "response.incomplete"})


class EndpointFailure(ModelError):
    """A model endpoint answered with an HTTP error, refused the connection or timed out."""


@dataclass(frozen=True)
class Failure:
    """What went wrong with one exchange: an HTTP status, or a transport error (status 0)."""

    method: str
    path: str
    status: int = 0
    reason: str = ""
    detail: str = ""
    request: str = ""  # the failed request's canonical form (a retry that succeeds clears it)

    def what(self) -> str:
        if self.status:
            return f"answered HTTP {self.status}{(' ' + self.reason) if self.reason else ''} to {self.method} {self.path}"
        return f"failed on {self.method} {self.path}: {self.detail}"


def _error_message(content: bytes) -> str:
    """The endpoint's own error message, if its body is OpenAI-style JSON; else the text."""
    text = content.decode("utf-8", "replace").strip()
    try:
        doc = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:BODY_SNIPPET]
    if isinstance(doc, dict):
        err = doc.get("error", doc)
        message = err.get("message") if isinstance(err, dict) else err
        if isinstance(message, str):
            return " ".join(message.split())[:BODY_SNIPPET]
    return " ".join(text.split())[:BODY_SNIPPET]


def http_failures(events: Iterable[Event]) -> list[Failure]:
    """Every recorded exchange the endpoint answered with an HTTP error."""
    return [
        Failure(e.method, e.path, e.status, e.reason, _error_message(e.content))
        for e in events
        if isinstance(e, LlmEvent) and e.status >= 400
    ]


def endpoint_failure(events: Iterable[Event], transport: Iterable[Failure] = ()) -> Failure | None:
    """The first endpoint failure of a recording (transport errors first: they come with no event)."""
    found = list(transport) + http_failures(events)
    return found[0] if found else None


def fix_for(failure: Failure, model: str, api_key_env: str, model_field: str = "model.name") -> str:
    status = failure.status
    key = f"${api_key_env} (model.api_key_env)" if api_key_env else "model.api_key_env"
    if status in (401, 403):
        return f"check the API key in {key} for this endpoint"
    if status == 404:
        return f"check the model name {model!r} ({model_field}) and that base_url ends where the API lives (e.g. …/v1)"
    if status == 429:
        return "the endpoint is rate limiting: retry later or lower executor.workers"
    if status >= 500:
        return "the server failed: check its logs, then rerun (nothing was cached)"
    if status >= 400:
        return "the endpoint rejected the request: check model.name, model.base_url and the endpoint's limits"
    if "incomplete answer: the " in failure.detail and (
        " answer " in failure.detail or "stream " in failure.detail
    ):
        # the server is up and answered, but not with a result (capture/shapes.py): no address to check
        return "the endpoint answered without a result (nothing was graded or cached): check its logs, then rerun"
    if "timed out" in failure.detail.lower() or "timeout" in failure.detail.lower():
        return "the endpoint timed out: check that it is up and not overloaded, then rerun"
    return "is the server up at that address? check model.base_url, then rerun"


def describe(
    failure: Failure,
    endpoint: str,
    model: str,
    api_key_env: str,
    what: str = "model endpoint",
    model_field: str = "model.name",
) -> str:
    """One line: the endpoint, what it answered, the fix."""
    said = f" ({failure.detail})" if failure.status and failure.detail else ""
    return f"{what} {endpoint} {failure.what()}{said}; {fix_for(failure, model, api_key_env, model_field)}"


#: how the openai client reports a dropped connection or a timeout, as the harness's error event
#: (and how a proxy session notes an answer its upstream refused, cut or garbled)
_CLIENT_TRANSPORT_ERRORS = ("APIConnectionError", "APITimeoutError", "EndpointFailure")


def stored_endpoint_failure(doc: Mapping[str, JSON]) -> bool:
    """Whether a stored episode document holds an endpoint failure (older versions stored them
    as results): an HTTP error, or the client's connection or timeout error the harness raised.
    Read as plain JSON: documents of every version come through here."""
    events = doc.get("events", [])
    for event in events if isinstance(events, list) else []:
        if not isinstance(event, Mapping):
            continue
        status = event.get("status") or 0
        if event.get("kind") == "llm" and isinstance(status, (int, float, str)) and int(status) >= 400:
            return True
        if event.get("kind") == "error" and str(event.get("message", "")).startswith(
            _CLIENT_TRANSPORT_ERRORS
        ):
            return True
    return False


def transport_failure(method: str, url: str, exc: BaseException) -> Failure:
    from urllib.parse import urlsplit

    kind = type(exc).__name__
    text = str(exc).strip() or kind
    return Failure(method.upper(), urlsplit(url).path, 0, "", f"{kind}: {text}"[:BODY_SNIPPET])


def _stream_problem(text: str) -> str | None:
    if not text.endswith("\n\n") and not text.endswith("\r\n\r\n"):
        return "the event stream was cut in the middle of an event"
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return None
        try:
            doc = json.loads(data)
        except ValueError:
            return f"an event of the stream is not JSON: {data[:60]!r}"
        problem = event_problem(doc)
        if problem:
            return problem
        if isinstance(doc, dict) and doc.get("type") in _TERMINAL_EVENTS:
            return None
    return "the event stream ended before its last event ([DONE] or response.completed)"


def incomplete_answer(path: str, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> str | None:
    """Why a 2xx answer is not a complete, well-formed one (None: it is): an SSE stream cut
    before ``[DONE]``/``response.completed`` or carrying an error event, a JSON endpoint's body
    that does not parse, or one that carries an error object or lacks its endpoint's shape
    (``shapes.py``: no ``choices``, …)."""
    if not 200 <= status < 300 or status == 204:
        return None
    ctype = next((v.lower() for k, v in headers if k.lower() == "content-type"), "")
    text = body.decode("utf-8", "replace")
    if "event-stream" in ctype or text.lstrip().startswith(("data:", "event:")):
        return _stream_problem(text)  # a stream labelled otherwise is still judged as a stream
    if "json" in ctype or path.split("?", 1)[0].endswith(_JSON_PATHS):
        try:
            doc = json.loads(text)
        except ValueError:
            shown = " ".join(text.split())[:60]
            return f"the {status} answer is not JSON ({len(body)} bytes: {shown!r})"
        return shape_problem(path, status, doc)
    return None
