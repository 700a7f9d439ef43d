"""The recording proxy: an OpenAI-compatible HTTP front for agents in another process.

A CLI agent (Codex, …) cannot be intercepted in-process, so it talks to this proxy
on a loopback port instead of its model endpoint. The proxy is bound to a
:class:`~replaykit.capture.tape.Tape`:

* **recording** — each ``POST /v1/chat/completions`` / ``POST /v1/responses`` is
  forwarded to the upstream with the *configured* key (never the client's); an SSE
  body is relayed to the client frame by frame as it arrives, and the exchange is
  kept as an :class:`LlmEvent` (request form, exact bytes, chunking) — the same
  form the in-process vcrpy recorder writes, so keys, store and digests apply.
* **replaying** — the tape answers (chunks re-sent as recorded) and the upstream
  may be down. A request that differs from the recorded one (after the declared
  normalisation rules) gets HTTP 409 whose body names the divergence and carries
  the normalised diff; the tape keeps the :class:`DivergenceError` for the caller.

Exchanges are serialised (one at a time) so positions in the tape are stable —
unless the server is ``concurrent`` (many agents at once, ``replaykit proxy``):
then exchanges overlap, are kept in the order they complete, and a replay matches
each request within its conversation (:mod:`replaykit.capture.conversations`:
by content on ``/v1``, in order per client on a session path ``/s/<session>/v1``).
Every exchange is kept (and handed to ``on_exchange``, which may persist it)
before the client receives its last byte, so a completed exchange is never lost.
``GET /v1/models`` passes through while recording and is answered from the tape
while replaying. Only clients that address the proxy by its own name are served, and no
web page but one the user allowed (``allow_origins``): the proxy holds the key, and a page
the user visits could otherwise spend it (``core/hosts.py``). Headers are never stored, so no API key reaches a cassette;
secrets are scrubbed from what is kept (request forms, the joined response stream),
never from what is relayed: the client gets the upstream's bytes unchanged.

This module holds the server and its options; the HTTP exchange is
:mod:`replaykit.capture.proxy_handler`, the upstream side :mod:`replaykit.capture.upstream`.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, TypedDict, Unpack

from replaykit.capture.conversations import ConversationPlayer, Resume
from replaykit.capture.proxy_handler import ProxyHandler, ProxyState
from replaykit.capture.tape import Tape
from replaykit.capture.upstream import Upstream
from replaykit.cassette.events import Event, LlmEvent
from replaykit.cassette.scrub import Scrubber, credential_digest, restore
from replaykit.core.determinism import canonical_json
from replaykit.core.errors import ConfigError, DivergenceError
from replaykit.core.hosts import HostCheck, OriginCheck, allowed_origins


class ProxyOptions(TypedDict, total=False):
    """How the proxy listens and talks upstream (every key optional)."""

    api_key: str  #: sent upstream instead of the client's key (default: none)
    host: str  #: the loopback address to listen on (default ``127.0.0.1``)
    port: int  #: 0 (the default): a free port
    timeout: float  #: seconds to wait for the upstream (default 600)
    concurrent: bool  #: let exchanges overlap (many agents at once; default False)
    on_exchange: Callable[[list[Event]], None] | None  #: called with the tape after every exchange
    on_divergence: Callable[[DivergenceError], None] | None  #: called for each 409, as it is sent
    on_note: Callable[[str], None] | None  #: one line worth telling the user (a refused HTTP/2 client)
    resume: Resume | None  #: record on top of an earlier recording (``Resume``)
    #: name → digest of each credential the recorded client presented (``credential_digest``):
    #: only that very credential is restored into replayed answers
    credentials: dict[str, str]
    #: browser origins besides the proxy's own that may call it (``--allow-origin``); a request
    #: with any other ``Origin``, or a ``Host`` that is not the proxy's address, is refused (403)
    allow_origins: tuple[str, ...]


class ProxyServer(ProxyState):
    """The proxy on a loopback port; start/stop it or use :func:`recording_proxy`."""

    def __init__(
        self,
        tape: Tape,
        upstream: str | None,
        scrubber: Scrubber | None = None,
        rules: tuple[str, ...] = (),
        **options: Unpack[ProxyOptions],
    ) -> None:
        if upstream is None and not tape.replaying:
            raise ConfigError("the recording proxy needs an upstream URL to record")
        api_key = options.get("api_key", "")
        concurrent = options.get("concurrent", False)
        secrets = dict((scrubber or Scrubber()).secrets)
        if api_key:
            secrets.setdefault("api_key", api_key)
        self.tape = tape
        self.upstream = Upstream(upstream, api_key, options.get("timeout", 600.0)) if upstream else None
        self.scrubber = Scrubber(secrets)
        self.rules = tuple(rules)
        self.exchange_lock = threading.Lock()
        self.keep_lock = threading.Lock()
        self.concurrent = concurrent
        self.on_exchange = options.get("on_exchange")
        self.on_divergence = options.get("on_divergence")
        self.on_note = options.get("on_note")
        self.resume = options.get("resume")
        self.credentials = dict(options.get("credentials", {}))
        self.presented: dict[str, str] = {}  # name → digest of what clients presented while recording
        self.notes: list[str] = []
        self.player = (
            ConversationPlayer(tape.label, tape.recorded)
            if concurrent and tape.recorded is not None
            else None
        )
        self.errors: list[str] = []
        self._thread: threading.Thread | None = None
        allowed = allowed_origins(options.get("allow_origins", ()))  # checked before the port is bound
        super().__init__((options.get("host", "127.0.0.1"), options.get("port", 0)), ProxyHandler)
        self.hosts = HostCheck(str(self.server_address[0]))
        self.origins = OriginCheck(self.hosts, int(self.server_address[1]), allowed)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> str:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, name="replaykit-proxy", daemon=True
        )
        self._thread.start()
        return self.base_url

    def note(self, line: str) -> None:
        """Something the user should hear of (once per kind of line)."""
        with self.keep_lock:
            if line in self.notes:
                return
            self.notes.append(line)
        if self.on_note is not None:
            self.on_note(line)

    def diverged(self, error: DivergenceError) -> None:
        if self.on_divergence is not None:
            self.on_divergence(error)

    def restore(self, chunks: list[bytes], presented: dict[str, str]) -> list[bytes]:
        """Recorded chunks for a client that presents ``presented``: a scrubbed credential is put
        back only where this client presents the very credential recorded under that name (by
        digest); any other key — another real one, a placeholder, none — gets the stored text."""
        same = {
            name: value
            for name, value in presented.items()
            if self.credentials.get(name) == credential_digest(value)
        }
        return restore(chunks, same)  # the upstream's own placeholder-like text un-escaped either way

    def keep(self, event: LlmEvent, presented: dict[str, str] | None = None) -> None:
        """Append a completed exchange to the tape and hand the tape to ``on_exchange``."""
        with self.keep_lock:
            for name, value in (presented or {}).items():
                self.presented.setdefault(name, credential_digest(value))
            if self.resume is not None:
                self.resume.continuations.add(event)
            self.tape.record(event)
            snapshot = list(self.tape.events)
            done = canonical_json(event.request_form())  # a retry that succeeded clears its failures
            self.tape.transport_errors = [f for f in self.tape.transport_errors if f.request != done]
        if self.on_exchange is not None:  # outside the lock: concurrent exchanges share one write
            self.on_exchange(snapshot)

    def stop(self) -> None:
        """Stop serving, drop open keep-alive connections, release the port."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self.close_connections()
        self.server_close()


@contextlib.contextmanager
def recording_proxy(
    tape: Tape,
    upstream: str | None,
    scrubber: Scrubber | None = None,
    rules: tuple[str, ...] = (),
    **options: Unpack[ProxyOptions],
) -> Iterator[str]:
    """Serve the proxy for ``tape`` on a free loopback port; yields its ``base_url`` (``…/v1``).

    ``api_key`` is what the proxy sends upstream (the client's key is dropped).
    While replaying, ``upstream`` is never contacted and may be ``None``.
    """
    server = ProxyServer(tape, upstream, scrubber, tuple(rules), **options)
    try:
        yield server.start()
    finally:
        server.stop()
