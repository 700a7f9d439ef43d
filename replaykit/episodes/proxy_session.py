"""``replaykit proxy``: one proxy session recorded into the store as an episode, or replayed.

A session is keyed like any cassette: kind ``proxy``, task id = the session name,
the model of its first call, the upstream's identity (``builtin`` or its URL as a service:
``capture.upstream.upstream_identity``, never a port) and the digest of the normalisation
rules. Record modes: ``once`` (replay the session if it exists — and if its recording
stopped early, record the turns that continue it — else record it), ``all`` (re-record),
``none`` (replay only: never the network).

Many agents may share one session (each on ``/v1``, or on its own ``/s/<name>/v1``;
see :mod:`replaykit.capture.conversations`). While recording, the episode is
rewritten (one transaction) after every exchange, before the client gets the end of
its response (:mod:`replaykit.episodes.proxy_writer`): a proxy killed with SIGKILL keeps
every exchange that completed. Each divergence is told as it happens (``on_line``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, NotRequired, TypedDict

from replaykit.capture import rule_files
from replaykit.capture.conversations import Resume
from replaykit.capture.proxy import ProxyServer
from replaykit.capture.tape import Tape
from replaykit.cassette.backend import EpisodeStore, RunStore
from replaykit.cassette.events import Episode, ErrorEvent, Event, LlmEvent
from replaykit.cassette.keys import CassetteKey
from replaykit.cassette.scrub import Scrubber
from replaykit.core.determinism import ENV_PINS
from replaykit.core.errors import CassetteNotFound, ConfigError, DivergenceError, DivergenceReport
from replaykit.core.hosts import allowed_origins
from replaykit.core.meta import EpisodeMeta, ProxyMeta, RuleDef
from replaykit.core.modes import SESSION_MODES, RecordMode
from replaykit.episodes.proxy_keys import (
    endpoint_identity,
    find_sessions,
    proxy_key,
    recorded_rules,
    reusable_session,
    session_rules,
)
from replaykit.episodes.proxy_writer import SessionWriter

Ready = Callable[[str, str], None]  # (base_url, "record" | "replay")
Line = Callable[[str], None]  # one line for the user while the session runs

#: the hint a replay that served less than was recorded, with no divergence, ends with
CACHE_HINT = (
    "the client sent fewer requests than were recorded, and none that differed: a client with its "
    "own response cache (DSPy, LiteLLM caching, …) answers from it instead of asking; turn that cache "
    "off while replaying"
)


class DivergenceLine(TypedDict):
    position: int | None
    reason: str
    diff: list[str]  # the first lines of the normalised diff


class SessionReport(TypedDict):
    """What a session ends with (``replaykit proxy --json``): the recording's keys, or the replay's."""

    mode: str  # record | replay
    cassette_id: str | None  # None: a recording with no call (not stored)
    name: str
    stopped_by: str  # stop | SIGINT | SIGTERM
    notes: list[str]  # lines told while the session ran (another upstream, a refused client, …)
    # record
    llm_calls: NotRequired[int]
    resumed: NotRequired[int]  # calls kept from the recording this one took up (0: a new one)
    stored: NotRequired[bool]
    untouched: NotRequired[bool]  # a session taken up that received no request: kept as it was
    digest: NotRequired[str]
    models: NotRequired[list[str]]
    upstream_errors: NotRequired[list[str]]
    store_errors: NotRequired[list[str]]
    # replay (and a resumed recording: what it served again)
    served: NotRequired[int]
    recorded: NotRequired[int]
    identical: NotRequired[bool]
    recorded_digest: NotRequired[str]
    replayed_digest: NotRequired[str]
    divergence: NotRequired[DivergenceReport | None]
    divergences: NotRequired[int]
    divergence_lines: NotRequired[list[DivergenceLine]]


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


class SessionLines:
    """What a running session tells its user, one line each (``on_line``), and keeps for its report."""

    def __init__(self, on_line: Line | None) -> None:
        self.on_line = on_line
        self.notes: list[str] = []
        self.divergences: list[DivergenceLine] = []

    def note(self, line: str) -> None:
        self.notes.append(line)
        if self.on_line is not None:
            self.on_line(line)

    def diverged(self, error: DivergenceError) -> None:
        report = error.report or {}
        diff = [d for d in report.get("diff", []) if d.startswith(("+", "-")) and d[:3] not in ("+++", "---")]
        self.divergences.append(
            {"position": report.get("position"), "reason": str(report.get("reason", error)), "diff": diff[:6]}
        )
        if self.on_line is not None:
            where = (
                f"event {report['position']}" if report.get("position") is not None else "no recorded event"
            )
            first = [next((d for d in diff if d.startswith(sign)), "") for sign in "-+"]
            short = " | ".join(" ".join(d.split())[:80] for d in first if d)
            self.on_line(
                f"divergence at {where}: {report.get('reason', error)}" + (f" ({short})" if short else "")
            )


def run_proxy_session(
    store: RunStore,
    name: str,
    upstream: str | None,
    record_mode: RecordMode = RecordMode.ONCE,
    rules: tuple[str, ...] = (),
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = 600.0,
    rule_file: Path | None = None,
    on_ready: Ready | None = None,
    on_line: Line | None = None,
    stop: threading.Event | None = None,
    allow_origins: tuple[str, ...] = (),
) -> SessionReport:
    """Serve one proxy session until stopped; return a report (recorded, or replayed and compared).
    Only clients that address it by its own name are served, and no web page but its own and
    ``allow_origins`` (browser clients the user means to record)."""
    record_mode = RecordMode.parse(record_mode, SESSION_MODES, " for the proxy")
    allow_origins = allowed_origins(allow_origins)
    if not 0 < timeout <= 86400:
        raise ConfigError(
            f"--timeout {timeout:g}: give the seconds one upstream exchange may take (0 < S <= 86400)"
        )
    rules, defs = session_rules(rules, rule_file)
    lines = SessionLines(on_line)
    rows = find_sessions(store, name, upstream, lines.note) if record_mode != "all" else []
    # the newest that may be replayed: an empty session or (when it can be re-recorded) endpoint
    # errors are never replayed as the answer
    usable = [r for r in rows if reusable_session(store, r, upstream if record_mode == "once" else None)]
    existing = usable[-1] if usable else None
    if rows and existing is None and record_mode == "none":
        raise CassetteNotFound(
            f"record mode none: proxy session {name!r} in store {store.location} recorded no call; "
            "record it again with --record-mode all"
        )
    if record_mode == "none" and existing is None:
        raise CassetteNotFound(
            f"record mode none: no proxy session {name!r} in store {store.location}; record it with --record-mode once"
        )
    session = _Session(
        store,
        name,
        rules,
        defs,
        lines,
        host=host,
        port=port,
        on_ready=on_ready,
        stop=stop,
        origins=allow_origins,
    )
    if existing is not None:
        episode = store.get_episode(str(existing["id"]))
        recorded_with = recorded_rules(episode.meta)
        rule_files.check_recorded(recorded_with[1], defs, recorded_with[0])
        if record_mode == "once" and upstream:  # the upstream is the user's, never one read from the store
            return session.resume(episode, upstream, api_key_env, timeout)
        return session.replay(episode, recorded_with[0])
    if not upstream:
        raise ConfigError("recording a proxy session needs --upstream URL (or --upstream builtin)")
    return session.record(upstream, api_key_env, timeout)


def _models(events: list[Event]) -> list[str]:
    seen = [e.body.get("model") for e in events if isinstance(e, LlmEvent) and isinstance(e.body, dict)]
    return list(dict.fromkeys(m for m in seen if isinstance(m, str) and m))


class _Session:
    """One session's serving: record (new, or taking up a recording that stopped early) or replay."""

    def __init__(
        self,
        store: EpisodeStore,
        name: str,
        rules: tuple[str, ...],
        defs: dict[str, RuleDef],
        lines: SessionLines,
        **serving: Any,
    ) -> None:
        self.store, self.name, self.rules, self.defs, self.lines = store, name, rules, defs, lines
        self.host, self.port = serving["host"], serving["port"]
        self.on_ready: Ready | None = serving["on_ready"]
        self.stop: threading.Event | None = serving["stop"]
        self.origins: tuple[str, ...] = serving["origins"]

    def _serve(self, server: ProxyServer, mode: str) -> str:
        try:
            base_url = server.start()
            return _wait(self.stop, lambda: self.on_ready(base_url, mode) if self.on_ready else None)
        finally:
            server.stop()

    def _proxy_meta(self, upstream: str, taken_up: Episode | None) -> ProxyMeta:
        """What the session's cassette says of its proxy (a taken-up session keeps its own
        upstream, rules and rule definitions)."""
        proxy_meta: ProxyMeta = (
            {**taken_up.meta["proxy"]} if taken_up and "proxy" in taken_up.meta else {"name": self.name}
        )
        proxy_meta["name"] = self.name
        proxy_meta.setdefault("upstream", endpoint_identity(upstream))
        proxy_meta.setdefault("rules", list(self.rules))
        if self.defs:
            proxy_meta.setdefault("rule_defs", dict(self.defs))
        return proxy_meta

    def record(
        self, upstream: str, api_key_env: str, timeout: float, taken_up: Episode | None = None
    ) -> SessionReport:
        tape = Tape(taken_up.id if taken_up else proxy_key(self.name, upstream, self.rules).id)
        kept = list(taken_up.events) if taken_up else []
        tape.events = list(kept)
        proxy_meta = self._proxy_meta(upstream, taken_up)
        recorded_credentials = dict(proxy_meta.get("credentials", {}))

        def key_of(events: list[Event]) -> CassetteKey:
            if taken_up is not None:
                return taken_up.key
            models = _models(events)
            return proxy_key(self.name, upstream, self.rules, models[0] if models else "", self.defs)

        server: ProxyServer | None = None

        def meta() -> EpisodeMeta:
            credentials = dict(recorded_credentials)
            if server is not None:
                for name, digest in server.presented.items():
                    credentials.setdefault(name, digest)
            return {
                "proxy": {**proxy_meta, "models": _models(tape.events), "credentials": credentials},
                "rules": list(self.rules),
                "pins": ENV_PINS,
            }

        writer = SessionWriter(self.store, key_of, meta)
        try:
            with _upstream(upstream, api_key_env) as (url, api_key):
                server = ProxyServer(
                    tape,
                    url,
                    Scrubber({"api_key": api_key}),
                    self.rules,
                    api_key=api_key,
                    host=self.host,
                    port=self.port,
                    allow_origins=self.origins,
                    timeout=timeout,
                    concurrent=True,
                    on_exchange=writer.write,
                    on_divergence=self.lines.diverged,
                    on_note=self.lines.note,
                    resume=Resume(kept) if taken_up else None,
                    credentials=recorded_credentials,
                )
                ended = self._serve(server, "record")
        finally:
            writer.close()
        events: list[Event] = list(tape.events)
        if tape.transport_errors:  # an answer the upstream refused, cut or garbled: kept, never reused
            events.append(ErrorEvent(f"EndpointFailure: upstream {tape.transport_errors[0].what()}"))
        new_calls = len(tape.llm_events) - len([e for e in kept if isinstance(e, LlmEvent)])
        if taken_up is not None and new_calls == 0 and not tape.transport_errors:
            return self._nothing_new(taken_up, server, ended)
        episode = Episode(key=key_of(events), events=events, meta=meta())
        calls = len(episode.llm_events)
        if calls:  # a session with no call (the client never connected, or timed out) is not kept
            self.store.put_episode(episode)
        report: SessionReport = {
            "mode": "record",
            "cassette_id": episode.id if calls else None,
            "name": self.name,
            "llm_calls": calls,
            "resumed": calls - new_calls if taken_up else 0,
            "stored": bool(calls),
            "stopped_by": ended,
            "digest": episode.digest,
            "models": _models(events),
            "notes": self.lines.notes,
            "upstream_errors": server.errors,
            "store_errors": [f"{type(writer.error).__name__}: {writer.error}"] if writer.error else [],
            "divergences": len(self.lines.divergences),
            "divergence_lines": self.lines.divergences,
        }
        if taken_up is not None:
            self.lines.note(
                f"took up proxy session {self.name!r}: {report['resumed']} recorded call(s) kept, "
                f"{new_calls} new call(s) recorded"
            )
        return report

    def resume(self, episode: Episode, upstream: str, api_key_env: str, timeout: float) -> SessionReport:
        """``once`` on a stored session: its exchanges are served; turns that continue one of its
        conversations at its recorded end are recorded and appended (the recorded prefix holds)."""
        return self.record(upstream, api_key_env, timeout, taken_up=episode)

    def replay(self, episode: Episode, rules: tuple[str, ...]) -> SessionReport:
        tape = Tape(episode.id, recorded=list(episode.events))
        proxy = episode.meta.get("proxy")
        server = ProxyServer(
            tape,
            None,
            None,
            self.rules or rules,
            host=self.host,
            port=self.port,
            allow_origins=self.origins,
            concurrent=True,
            on_divergence=self.lines.diverged,
            on_note=self.lines.note,
            credentials=dict(proxy.get("credentials", {})) if proxy else {},
        )
        ended = self._serve(server, "replay")
        return self._replayed(episode, server, ended)

    def _nothing_new(self, episode: Episode, server: ProxyServer, ended: str) -> SessionReport:
        """A session taken up that recorded nothing new: a replay of what it was asked, or, asked
        nothing at all, its recording kept as it was (never a replay judged "NOT identical")."""
        if server.resume is not None and server.resume.player.cursor == 0 and not self.lines.divergences:
            return self._untouched(episode, ended)
        return self._replayed(episode, server, ended)

    def _untouched(self, episode: Episode, ended: str) -> SessionReport:
        """A ``once`` session taken up that received no request: its recording, kept as it was."""
        calls = len(episode.llm_events)
        return {
            "mode": "record",
            "cassette_id": episode.id,
            "name": episode.key.task_id,
            "llm_calls": calls,
            "resumed": calls,
            "stored": True,
            "untouched": True,
            "stopped_by": ended,
            "digest": episode.digest,
            "models": _models(list(episode.events)),
            "notes": self.lines.notes,
            "upstream_errors": [],
            "store_errors": [],
            "divergences": 0,
            "divergence_lines": [],
        }

    def _replayed(self, episode: Episode, server: ProxyServer | None, ended: str) -> SessionReport:
        player = server.player if server is not None and server.resume is None else None
        if server is not None and server.resume is not None:
            player = server.resume.player
        assert player is not None
        identical = (
            player.cursor > 0
            and not self.lines.divergences
            and player.complete
            and player.digest == episode.digest
        )
        if not identical and not self.lines.divergences and player.cursor < len(episode.events):
            self.lines.note(f"served {player.cursor} of {len(episode.events)} recorded call(s): {CACHE_HINT}")
        first = player.divergence
        return {
            "mode": "replay",
            "cassette_id": episode.id,
            "name": episode.key.task_id,
            "served": player.cursor,
            "recorded": len(episode.events),
            "identical": identical,
            "stopped_by": ended,
            "notes": self.lines.notes,
            "recorded_digest": episode.digest,
            "replayed_digest": player.digest,
            "divergence": first.report if first else None,
            "divergences": len(self.lines.divergences),
            "divergence_lines": self.lines.divergences,
        }
