"""``replaykit proxy``: one proxy session recorded into the store as an episode, or replayed.

A session is keyed like any cassette: kind ``proxy``, task id = the session name,
the upstream's identity (``builtin`` or its URL, never a port) and the digest of
the normalisation rules. Record modes: ``once`` (replay the session if it exists,
else record it), ``all`` (re-record), ``none`` (replay only).

Many agents may share one session (each on ``/v1``, or on its own ``/s/<name>/v1``;
see :mod:`replaykit.capture.conversations`). While recording, the episode is
rewritten (one transaction) after every exchange, before the client gets the end of
its response: a proxy killed with SIGKILL keeps every exchange that completed. The
final write happens when the session ends (Ctrl-C, SIGTERM or ``stop``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable, Iterator, NotRequired, TypedDict

from replaykit.capture.failures import stored_endpoint_failure
from replaykit.capture.matchers import get_rule
from replaykit.capture.proxy import ProxyServer
from replaykit.capture.tape import Tape
from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.events import Episode, ErrorEvent, Event
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.scrub import Scrubber
from replaykit.core.determinism import ENV_PINS, digest_of
from replaykit.core.errors import CassetteNotFound, ConfigError, DivergenceReport
from replaykit.core.modes import SESSION_MODES, RecordMode
from replaykit.core.records import EpisodeMeta

Ready = Callable[[str, str], None]  # (base_url, "record" | "replay")


class SessionReport(TypedDict):
    """What a session ends with (``replaykit proxy --json``): the recording's keys, or the replay's."""

    mode: str  # record | replay
    cassette_id: str | None  # None: a recording with no call (not stored)
    name: str
    stopped_by: str  # stop | SIGINT | SIGTERM
    # record
    llm_calls: NotRequired[int]
    stored: NotRequired[bool]
    digest: NotRequired[str]
    upstream_errors: NotRequired[list[str]]
    store_errors: NotRequired[list[str]]
    # replay
    served: NotRequired[int]
    recorded: NotRequired[int]
    identical: NotRequired[bool]
    recorded_digest: NotRequired[str]
    replayed_digest: NotRequired[str]
    divergence: NotRequired[DivergenceReport | None]
    divergences: NotRequired[int]


def endpoint_identity(upstream: str) -> str:
    return "builtin" if upstream == "builtin" else upstream.rstrip("/")


#: Normalisation rules an external agent needs so its replay matches its recording
#: (``replaykit proxy --agent NAME``): Codex puts a fresh session id, UUIDs and times
#: into every request.
AGENT_RULES: dict[str, tuple[str, ...]] = {
    "codex": ("uuids", "timestamps", "codex-session"),
}


def rules_for(agent: str | None, rules: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``rules`` plus the agent's, in order, each once."""
    extra = AGENT_RULES[agent] if agent else ()
    return tuple(dict.fromkeys((*extra, *rules)))


def proxy_key(name: str, upstream: str, rules: tuple[str, ...]) -> CassetteKey:
    return CassetteKey(
        harness_sha="",
        task_id=name,
        task_digest="",
        model=ModelId(name="", endpoint=endpoint_identity(upstream)),
        seed=0,
        config_digest=digest_of({"rules": list(rules)})[:16],
        kind="proxy",
    )


def find_session(store: StoreBackend, name: str, upstream: str | None) -> Mapping[str, object] | None:
    """The stored session called ``name`` (for this upstream, when given)."""
    rows = store.find_proxy_sessions(name, endpoint_identity(upstream) if upstream else None)
    if len({r["endpoint"] for r in rows}) > 1:
        raise ConfigError(
            f"proxy session {name!r} was recorded against several upstreams; pass --upstream to pick one"
        )
    return rows[-1] if rows else None


@contextlib.contextmanager
def _upstream(upstream: str, api_key_env: str) -> Iterator[tuple[str, str]]:
    if upstream != "builtin":
        yield upstream.rstrip("/"), os.environ.get(api_key_env, "")
        return
    from replaykit.models.endpoint import BUILTIN_KEY
    from replaykit.models.reference.server import ReferenceServer

    with ReferenceServer() as server:
        yield server.base_url, BUILTIN_KEY


def _wait(stop: threading.Event | None, ready: Callable[[], None] = lambda: None) -> str:
    """Call ``ready``, then block until ``stop`` is set, SIGINT (Ctrl-C) or SIGTERM — even where a
    shell ignored SIGINT; the handlers are in place before ``ready`` announces the session.
    Returns what ended the wait: ``"stop"``, ``"SIGINT"`` or ``"SIGTERM"``."""
    previous: dict[signal.Signals, Any] = {}
    received: list[str] = []
    if threading.current_thread() is threading.main_thread():

        def on_signal(signum: int, frame: Any) -> None:
            received.append(signal.Signals(signum).name)
            raise KeyboardInterrupt

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        ready()
        while stop is None or not stop.is_set():
            time.sleep(0.1)
    except KeyboardInterrupt:
        return received[0] if received else "SIGINT"
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return "stop"


def _reusable(store: StoreBackend, row: Mapping[str, object], upstream: str | None) -> bool:
    """A stored session may be replayed as the answer unless it recorded no call (older
    versions stored empty sessions) or, when it could be re-recorded, an endpoint error."""
    doc = store.get_json(str(row["doc"]))
    if not any(isinstance(e, dict) and e.get("kind") == "llm" for e in doc.get("events", [])):
        return False
    return not (upstream and stored_endpoint_failure(doc))


class _SessionWriter:
    """Persists the session after every exchange, from one thread that owns its own
    store connection (SQLite connections belong to their thread). Writers waiting at
    the same time share one write of the newest tape."""

    def __init__(self, source: StoreBackend, key: CassetteKey, meta: EpisodeMeta) -> None:
        self.source, self.key, self.meta = source, key, meta
        self.jobs: queue.Queue[tuple[list[Event], threading.Event] | None] = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="replaykit-proxy-writer", daemon=True)
        self.thread.start()

    def write(self, events: list[Event]) -> None:
        done = threading.Event()
        self.jobs.put((events, done))
        done.wait()

    def _run(self) -> None:
        store = self.source.reopen()
        written = 0
        try:
            while True:
                job = self.jobs.get()
                if job is None:
                    return
                batch = [job]
                while True:  # coalesce: the newest tape covers every waiting writer
                    try:
                        nxt = self.jobs.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        self.jobs.put(None)
                        break
                    batch.append(nxt)
                newest = max((events for events, _ in batch), key=len)
                if len(newest) > written:  # tapes only grow: a shorter one is already stored
                    try:
                        store.put_episode(Episode(key=self.key, events=newest, meta=self.meta))
                        written = len(newest)
                    except BaseException as exc:  # reported by the session; the final write retries
                        self.error = exc
                for _, done in batch:
                    done.set()
        finally:
            store.close()

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=30)


def run_proxy_session(
    store: StoreBackend,
    name: str,
    upstream: str | None,
    record_mode: RecordMode = RecordMode.ONCE,
    rules: tuple[str, ...] = (),
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key_env: str = "OPENAI_API_KEY",
    on_ready: Ready | None = None,
    stop: threading.Event | None = None,
) -> SessionReport:
    """Serve one proxy session until stopped; return a report (recorded, or replayed and compared)."""
    record_mode = RecordMode.parse(record_mode, SESSION_MODES, " for the proxy")
    for rule in rules:
        get_rule(rule)
    existing = find_session(store, name, upstream) if record_mode != "all" else None
    if existing is not None and record_mode == "once" and not _reusable(store, existing, upstream):
        existing = None  # re-recorded: an empty session or endpoint errors are never replayed as the answer
    if existing is not None and record_mode == "none" and not _reusable(store, existing, None):
        raise CassetteNotFound(
            f"record mode none: proxy session {name!r} in store {store.location} recorded no call; "
            "record it again with --record-mode all"
        )
    if record_mode == "none" and existing is None:
        raise CassetteNotFound(
            f"record mode none: no proxy session {name!r} in store {store.location}; record it with --record-mode once"
        )
    if existing is not None:
        return _replay(store, existing, rules, host, port, on_ready, stop)
    if not upstream:
        raise ConfigError("recording a proxy session needs --upstream URL (or --upstream builtin)")
    key = proxy_key(name, upstream, rules)
    tape = Tape(key.id)
    meta: EpisodeMeta = {
        "proxy": {"name": name, "upstream": endpoint_identity(upstream), "rules": list(rules)},
        "rules": list(rules),
        "pins": ENV_PINS,
    }
    writer = _SessionWriter(store, key, meta)
    try:
        with _upstream(upstream, api_key_env) as (url, api_key):
            server = ProxyServer(
                tape,
                url,
                Scrubber({"api_key": api_key}),
                rules,
                api_key=api_key,
                host=host,
                port=port,
                concurrent=True,
                on_exchange=writer.write,
            )
            try:
                base_url = server.start()
                ended = _wait(stop, lambda: on_ready(base_url, "record") if on_ready else None)
            finally:
                server.stop()
    finally:
        writer.close()
    events: list[Event] = list(tape.events)
    if tape.transport_errors:  # an answer the upstream refused, cut or garbled: kept, never reused
        events.append(ErrorEvent(f"EndpointFailure: upstream {tape.transport_errors[0].what()}"))
    episode = Episode(key=key, events=events, meta=meta)
    calls = len(episode.llm_events)
    if calls:  # a session with no call (the client never connected, or timed out) is not kept
        store.put_episode(episode)
    return {
        "mode": "record",
        "cassette_id": key.id if calls else None,
        "name": name,
        "llm_calls": calls,
        "stored": bool(calls),
        "stopped_by": ended,
        "digest": episode.digest,
        "upstream_errors": server.errors,
        "store_errors": [f"{type(writer.error).__name__}: {writer.error}"] if writer.error else [],
    }


def _replay(
    store: StoreBackend,
    row: Mapping[str, object],
    rules: tuple[str, ...],
    host: str,
    port: int,
    on_ready: Ready | None,
    stop: threading.Event | None,
) -> SessionReport:
    episode = store.get_episode(str(row["id"]))
    proxy = episode.meta.get("proxy")
    rules = rules or tuple(proxy.get("rules", ()) if proxy else ())
    tape = Tape(episode.id, recorded=list(episode.events))
    server = ProxyServer(tape, None, None, rules, host=host, port=port, concurrent=True)
    player = server.player
    assert player is not None
    try:
        base_url = server.start()
        ended = _wait(stop, lambda: on_ready(base_url, "replay") if on_ready else None)
    finally:
        server.stop()
    return {
        "mode": "replay",
        "cassette_id": episode.id,
        "name": episode.key.task_id,
        "served": player.cursor,
        "recorded": len(episode.events),
        "identical": player.cursor > 0
        and player.divergence is None
        and player.complete
        and player.digest == episode.digest,
        "stopped_by": ended,
        "recorded_digest": episode.digest,
        "replayed_digest": player.digest,
        "divergence": player.divergence.report if player.divergence else None,
        "divergences": len(player.divergences),
    }
