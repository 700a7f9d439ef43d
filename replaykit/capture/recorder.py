"""vcrpy integration: one vcrpy cassette per episode, backed by a :class:`Tape`.

vcrpy intercepts (its patchers, plus replaykit's chunk-keeping httpx2 stubs as
custom patches); replaykit decides. Its defaults are overridden for this domain:
matching is on the request form (method, path, canonical body) and position,
never on headers; nothing plays twice; secrets are scrubbed before anything is
kept; look-up is by position in the episode, not a scan. While recording, a tape with
donors (``donor.py``) answers what they can; ``rewrite`` (``inject.py``) changes what the
harness sends, recording and replaying alike.
"""

from __future__ import annotations

from typing import Any, Callable

from vcr.cassette import Cassette
from vcr.record_mode import RecordMode

from replaykit.capture.failures import DEFAULT_TIMEOUT_S
from replaykit.capture.matchers import request_form
from replaykit.capture.stubs import httpx2_patches
from replaykit.capture.tape import Tape
from replaykit.cassette.events import LlmEvent, RequestForm
from replaykit.cassette.scrub import Scrubber
from replaykit.cassette.vcr_format import VcrResponse
from replaykit.core.determinism import canonical_json

#: vcrpy patchers left off by default: the Docker SDK and other plumbing talk
#: requests/urllib3 during an episode, and only model traffic belongs in a cassette.
SKIPPED_PATCHERS = ("httplib", "requests", "boto3", "urllib3", "httplib2", "tornado", "aiohttp", "httpx2")


class EpisodeCassette(Cassette):  # type: ignore[misc]  # vcrpy is untyped
    """A vcrpy Cassette whose interactions live in a replaykit tape."""

    def __init__(
        self,
        path: str,
        tape: Tape | None = None,
        scrubber: Scrubber | None = None,
        rules: tuple[str, ...] = (),
        skip_patchers: tuple[str, ...] = SKIPPED_PATCHERS,
        timeout_s: float | None = None,
        player: Any = None,
        rewrite: Callable[[bytes, int], bytes] | None = None,
        **kwargs: Any,
    ) -> None:
        assert tape is not None
        mode = RecordMode.NONE if tape.replaying else RecordMode.ALL
        super().__init__(path, record_mode=mode, skip_patchers=skip_patchers, **kwargs)
        self.tape = tape
        self.scrubber = scrubber or Scrubber()
        self.rules = rules
        #: the total time one recorded call may take (model.timeout_s)
        self.timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
        #: a ConversationPlayer: replay matches each request by content (concurrent clients)
        #: instead of by position on the tape
        self.player = player
        #: changes each request body before it is matched or sent (body, model calls so far)
        self.rewrite = rewrite
        self._served: LlmEvent | None = None  # a donor's answer to the request being handled
        self.custom_patches = tuple(httpx2_patches(self))

    # The store, not a file, holds episodes; the rollout writes them whole.
    def _load(self) -> None:
        return None

    def _save(self, force: bool = False) -> None:
        return None

    @property
    def write_protected(self) -> bool:
        return self.tape.replaying

    def form(self, request: Any) -> RequestForm:
        return request_form(request.method, request.uri, request.body, self.scrubber, self.rules)

    def rewritten(self, body: bytes) -> bytes:
        """The body as it is sent: ``rewrite``'s, when set (its ``ValueError`` is a divergence)."""
        if self.rewrite is None:
            return body
        try:
            return self.rewrite(body, len(self.tape.llm_events))
        except ValueError as exc:
            raise self.tape.diverge("fork", str(exc), None, None, []) from None

    def can_play_response_for(self, request: Any) -> bool:
        if self.tape.on_call is not None:  # asked once per request, before anything is sent or played
            self.tape.on_call()
        if self.tape.replaying:
            return True
        if self.tape.donors is None:
            return False
        # the request exactly as sent: never scrubbed, never normalised (donor.py)
        self._served = self.tape.serve(request_form(request.method, request.uri, request.body))
        return self._served is not None

    def play_event(self, request: Any) -> LlmEvent:
        if self._served is not None:  # recording: a donor's answer, already on the tape
            event, self._served = self._served, None
            return event
        if self.player is not None:
            played: LlmEvent = self.player.play(self.form(request))
            return played
        return self.tape.play_llm(self.form(request))

    def play_response(self, request: Any) -> VcrResponse:
        """vcrpy's response dict, for vcrpy's own stubs (when a patcher is enabled)."""
        event = self.play_event(request)
        headers: dict[str, list[str]] = {}
        for name, value in event.headers:
            headers.setdefault(name, []).append(value)
        return {
            "status": {"code": event.status, "message": event.reason},
            "headers": headers,
            "body": {"string": event.content},
        }

    def record_event(
        self, request: Any, status: int, reason: str, headers: list[tuple[str, str]], chunks: list[bytes]
    ) -> LlmEvent:
        """Keep one exchange on the tape: the stored copy is scrubbed (the joined stream), the caller relays the original."""
        chunks = self.scrubber.chunks(chunks)
        form = self.form(request)
        event = LlmEvent(
            method=form["method"],
            path=form["path"],
            body=form["body"],
            status=status,
            reason=reason or "",
            headers=headers,
            content=b"".join(chunks),
            chunks=[len(c) for c in chunks],
        )
        self.tape.record(event)
        if self.tape.transport_errors:  # a retry that got a complete answer clears its earlier attempts
            done = canonical_json(form)  # (the whole request: only worth it when there is something to clear)
            self.tape.transport_errors = [f for f in self.tape.transport_errors if f.request != done]
        return event

    def note_transport_error(self, request: Any, exc: BaseException) -> None:
        """The endpoint could not be reached, cut its answer or passed the deadline: an infrastructure failure."""
        import dataclasses

        from replaykit.capture.failures import transport_failure

        failure = transport_failure(request.method, request.uri, exc)
        failure = dataclasses.replace(failure, request=canonical_json(self.form(request)))
        self.tape.transport_errors.append(failure)

    def append(self, request: Any, response: VcrResponse) -> None:
        """vcrpy's stubs record through here (one chunk: they join the body)."""
        body = response["body"]["string"]
        body = body.encode("utf-8") if isinstance(body, str) else body
        headers = [
            (k.lower(), v)
            for k, vs in response.get("headers", {}).items()
            for v in vs
            if k.lower() in ("content-type", "content-encoding")
        ]
        self.record_event(
            request, response["status"]["code"], response["status"].get("message", ""), headers, [body]
        )


def episode_cassette(
    label: str,
    tape: Tape,
    scrubber: Scrubber | None = None,
    rules: tuple[str, ...] = (),
    timeout_s: float | None = None,
    rewrite: Callable[[bytes, int], bytes] | None = None,
) -> Any:
    """A context manager that patches HTTP clients for one episode; ``timeout_s``: each call's
    total deadline; ``rewrite``: what changes each request body (a fork's message)."""
    return EpisodeCassette.use(
        path=label, tape=tape, scrubber=scrubber, rules=rules, timeout_s=timeout_s, rewrite=rewrite
    )
