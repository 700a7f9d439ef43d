"""httpx2 transport stubs (vcrpy-style) that keep the response chunking.

vcrpy's own httpx stub joins a streamed body into one string; replaykit needs the
exact bytes *and* the chunks the client received, so it registers these stubs as
vcrpy ``custom_patches`` (and skips vcrpy's built-in httpx2 patcher). Everything
else — when to play, when to record, what is write-protected — is the cassette's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import time
from typing import Any, AsyncIterator, Callable, Iterator, Protocol
from urllib.parse import urlsplit

from replaykit.capture.deadlines import DEADLINES, Entry
from replaykit.capture.failures import incomplete_answer
from replaykit.cassette.events import KEPT_HEADERS, LlmEvent
from replaykit.cassette.scrub import presented_credentials, restore


class EpisodeCassette(Protocol):
    """What the stubs ask of the cassette they patch for (``recorder.EpisodeCassette`` is the one)."""

    timeout_s: float  # the total time one recorded call may take
    rewrite: Callable[[bytes, int], bytes] | None  # what changes each request body (a fork's message)

    def rewritten(self, body: bytes) -> bytes: ...

    def can_play_response_for(self, request: Any) -> bool: ...

    def play_event(self, request: Any) -> LlmEvent: ...

    def record_event(
        self, request: Any, status: int, reason: str, headers: list[tuple[str, str]], chunks: list[bytes]
    ) -> LlmEvent: ...

    def note_transport_error(self, request: Any, exc: BaseException) -> None: ...


def kept_headers(headers: Any) -> list[tuple[str, str]]:
    """The response headers replaykit stores and presents: the same in record and replay."""
    return [(k.lower(), v) for k, v in headers.multi_items() if k.lower() in KEPT_HEADERS]


def _response(
    httpx2: Any, status: int, reason: str, headers: list[tuple[str, str]], chunks: list[bytes], is_async: bool
) -> Any:
    stream = _AsyncChunks(chunks, httpx2) if is_async else _SyncChunks(chunks, httpx2)
    return httpx2.Response(
        status,
        headers=headers,
        stream=stream,
        extensions={"reason_phrase": reason.encode("ascii", "replace"), "http_version": b"HTTP/1.1"},
    )


_STREAMS: dict[int, tuple[type, type]] = {}


def _stream_classes(httpx2: Any) -> tuple[type, type]:
    """Byte-stream classes over a list of chunks, defined once per httpx2 module."""
    classes = _STREAMS.get(id(httpx2))
    if classes is None:

        class SyncChunks(httpx2.SyncByteStream):  # type: ignore[misc]  # a module passed in: Any
            def __init__(self, chunks: list[bytes]) -> None:
                self.chunks = chunks

            def __iter__(self) -> Iterator[bytes]:
                yield from self.chunks

        class AsyncChunks(httpx2.AsyncByteStream):  # type: ignore[misc]
            def __init__(self, chunks: list[bytes]) -> None:
                self.chunks = chunks

            async def __aiter__(self) -> AsyncIterator[bytes]:
                for chunk in self.chunks:
                    yield chunk

        classes = _STREAMS[id(httpx2)] = (SyncChunks, AsyncChunks)
    return classes


def _SyncChunks(chunks: list[bytes], httpx2: Any) -> Any:
    return _stream_classes(httpx2)[0](chunks)


def _AsyncChunks(chunks: list[bytes], httpx2: Any) -> Any:
    return _stream_classes(httpx2)[1](chunks)


class _Request:
    """What the cassette reads of an intercepted request (method, uri, body): built
    once per call, without vcrpy's header bookkeeping (headers are never matched)."""

    __slots__ = ("body", "method", "uri")

    def __init__(self, method: str, uri: str, body: bytes) -> None:
        self.method, self.uri, self.body = method, uri, body


def _vcr_request(real_request: Any, body: bytes) -> Any:
    return _Request(real_request.method, str(real_request.url), body)


def _presented(real_request: Any) -> dict[str, str]:
    """The credential the replaying client sends, under the names it is scrubbed by: the
    endpoint key of an episode (``api_key``) and a proxy client's (``client_authorization``)."""
    found = presented_credentials(real_request.headers.multi_items())
    if "client_authorization" in found:
        found.setdefault("api_key", found["client_authorization"])
    return found


def _watchdog(response: Any, deadline: float) -> Entry | None:
    """Cuts the response's socket when the call's total deadline passes: a trickling body
    never hangs the caller (httpx's own timeouts are per read). None when the response has
    no socket to cut (an in-memory transport): the deadline is still checked after the read."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        return None

    def cut() -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    return DEADLINES.arm(deadline, cut)


def _past_deadline(httpx2: Any, cassette: EpisodeCassette, exc: BaseException, deadline: float) -> Any:
    """``exc``, or a read timeout naming the total deadline once it has passed."""
    if time.monotonic() < deadline and not isinstance(exc, asyncio.TimeoutError):
        return exc
    return httpx2.ReadTimeout(
        f"the call took longer than its total deadline of {cassette.timeout_s:g}s (model.timeout_s)"
    )


def _check_answer(
    httpx2: Any,
    cassette: EpisodeCassette,
    request: Any,
    status: int,
    headers: list[tuple[str, str]],
    chunks: list[bytes],
    deadline: float,
) -> None:
    """Raises (as a protocol error the client retries) unless the answer is complete and well
    formed; once per response, on the kept headers (the content type is one of them)."""
    if time.monotonic() > deadline:
        raise _past_deadline(httpx2, cassette, TimeoutError(), deadline)
    problem = incomplete_answer(urlsplit(request.uri).path, status, headers, b"".join(chunks))
    if problem:
        raise httpx2.RemoteProtocolError(f"incomplete answer: {problem}")


def _rewritten(cassette: EpisodeCassette, real_request: Any, body: bytes) -> bytes:
    """The body as it is sent (a fork's message added), its length header kept true."""
    if cassette.rewrite is None:
        return body
    new = cassette.rewritten(body)
    if new != body:
        real_request.headers["Content-Length"] = str(len(new))
    return new


def handle_request(cassette: EpisodeCassette, real: Callable[..., Any], httpx2: Any) -> Callable[..., Any]:
    @functools.wraps(real)
    def _handle(self: Any, real_request: Any) -> Any:
        body = b"".join(real_request.stream)
        body = _rewritten(cassette, real_request, body)
        real_request.stream = httpx2.ByteStream(body)
        request = _vcr_request(real_request, body)
        if cassette.can_play_response_for(request):
            event = cassette.play_event(request)
            chunks = restore(event.split_chunks(), _presented(real_request))
            return _response(httpx2, event.status, event.reason, event.headers, chunks, False)
        deadline = time.monotonic() + cassette.timeout_s
        try:
            real_response = real(self, real_request)
        except Exception as exc:  # refused, timed out, ...: an endpoint failure with no event
            cassette.note_transport_error(request, exc)
            raise
        watchdog = _watchdog(real_response, deadline)
        try:
            chunks = []
            for chunk in real_response.stream:
                chunks.append(bytes(chunk))
                if time.monotonic() > deadline:
                    break
            headers = kept_headers(real_response.headers)
            _check_answer(httpx2, cassette, request, real_response.status_code, headers, chunks, deadline)
        except Exception as exc:  # cut body, cut stream, unparsable answer, deadline passed
            exc = _past_deadline(httpx2, cassette, exc, deadline)
            cassette.note_transport_error(request, exc)
            raise exc from None
        finally:
            if watchdog is not None:
                DEADLINES.cancel(watchdog)
            real_response.stream.close()
        reason = real_response.reason_phrase
        cassette.record_event(request, real_response.status_code, reason, headers, chunks)
        # transparent: the client gets the upstream's bytes; only the stored copy is scrubbed
        return _response(httpx2, real_response.status_code, reason or "", headers, chunks, False)

    return _handle


def handle_async_request(
    cassette: EpisodeCassette, real: Callable[..., Any], httpx2: Any
) -> Callable[..., Any]:
    @functools.wraps(real)
    async def _handle(self: Any, real_request: Any) -> Any:
        body = b"".join([part async for part in real_request.stream])
        body = _rewritten(cassette, real_request, body)
        real_request.stream = httpx2.ByteStream(body)
        request = _vcr_request(real_request, body)
        if cassette.can_play_response_for(request):
            event = cassette.play_event(request)
            chunks = restore(event.split_chunks(), _presented(real_request))
            return _response(httpx2, event.status, event.reason, event.headers, chunks, True)
        deadline = time.monotonic() + cassette.timeout_s
        try:
            real_response = await asyncio.wait_for(real(self, real_request), cassette.timeout_s)
        except Exception as exc:
            exc = _past_deadline(httpx2, cassette, exc, deadline)
            cassette.note_transport_error(request, exc)
            raise exc from None
        try:

            async def read_body() -> list[bytes]:
                return [bytes(c) async for c in real_response.stream]

            chunks = await asyncio.wait_for(read_body(), max(0.0, deadline - time.monotonic()))
            headers = kept_headers(real_response.headers)
            _check_answer(httpx2, cassette, request, real_response.status_code, headers, chunks, deadline)
        except Exception as exc:
            exc = _past_deadline(httpx2, cassette, exc, deadline)
            cassette.note_transport_error(request, exc)
            raise exc from None
        finally:
            await real_response.stream.aclose()
        cassette.record_event(
            request, real_response.status_code, real_response.reason_phrase, headers, chunks
        )
        return _response(
            httpx2, real_response.status_code, real_response.reason_phrase or "", headers, chunks, True
        )

    return _handle


def httpx2_patches(cassette: EpisodeCassette) -> list[tuple[Any, str, Any]]:
    """vcrpy custom_patches triples for httpx2's real transports."""
    try:
        import httpx2
    except ImportError:  # pragma: no cover
        return []
    return [
        (
            httpx2.HTTPTransport,
            "handle_request",
            handle_request(cassette, httpx2.HTTPTransport.handle_request, httpx2),
        ),
        (
            httpx2.AsyncHTTPTransport,
            "handle_async_request",
            handle_async_request(cassette, httpx2.AsyncHTTPTransport.handle_async_request, httpx2),
        ),
    ]
