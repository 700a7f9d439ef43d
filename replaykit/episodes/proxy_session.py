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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Iterator, NotRequired, TypedDict

from replaykit.capture import rule_files
from replaykit.capture.conversations import Resume
from replaykit.capture.failures import stored_endpoint_failure
from replaykit.capture.matchers import get_rule
from replaykit.capture.proxy import ProxyServer
from replaykit.capture.tape import Tape
from replaykit.capture.upstream import upstream_identity
from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.events import Episode, ErrorEvent, Event, LlmEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.scrub import Scrubber
from replaykit.core.determinism import ENV_PINS, digest_of
from replaykit.core.errors import CassetteNotFound, ConfigError, DivergenceError, DivergenceReport
from replaykit.core.meta import EpisodeMeta, ProxyMeta, RuleDef
from replaykit.core.modes import SESSION_MODES, RecordMode
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


def endpoint_identity(upstream: str) -> str:
    return upstream_identity(upstream)


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


def proxy_key(
    name: str,
    upstream: str,
    rules: tuple[str, ...],
    model: str = "",
    rule_defs: Mapping[str, RuleDef] | None = None,
) -> CassetteKey:
    rules_part: dict[str, object] = {"rules": list(rules)}
    if rule_defs:  # a rule file's definitions are identity too (absent: the keys of older sessions)
        rules_part["rule_defs"] = {n: dict(d) for n, d in sorted(rule_defs.items())}
    return CassetteKey(
        harness_sha="",
        task_id=name,
        task_digest="",
        model=ModelId(name=model, endpoint=endpoint_identity(upstream)),
        seed=0,
        config_digest=digest_of(rules_part)[:16],
        kind="proxy",
    )


def find_sessions(
    store: StoreBackend, name: str, upstream: str | None, note: Line | None = None
) -> list[Mapping[str, object]]:
    """The stored sessions called ``name``, oldest first (for this upstream, when given: compared
    as services, so ``localhost:8080`` finds one recorded against ``127.0.0.1:9090``)."""
    groups: dict[str, list[Mapping[str, object]]] = {}
    for row in store.find_proxy_sessions(name):
        groups.setdefault(endpoint_identity(str(row["endpoint"])), []).append(row)
    if upstream is None:
        if len(groups) > 1:
            raise ConfigError(
                f"proxy session {name!r} was recorded against several upstreams "
                f"({', '.join(sorted(groups))}); pass --upstream to pick one"
            )
        return next(iter(groups.values()), [])
    wanted = endpoint_identity(upstream)
    others = sorted(u for u in groups if u != wanted)
    if others and note is not None:
        note(
            f"proxy session {name!r} is also recorded against {', '.join(others)}; this one is for "
            f"{wanted} (a replay without --upstream will ask which)"
        )
    return groups.get(wanted, [])


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


def _rules(rules: tuple[str, ...], rule_file: Path | None) -> tuple[tuple[str, ...], dict[str, RuleDef]]:
    """The session's rules: the named ones, then a rule file's (installed), each checked."""
    defs = rule_files.load_rule_file(rule_file) if rule_file is not None else {}
    rules = tuple(dict.fromkeys((*rules, *rule_files.install(defs))))
    for rule in rules:
        get_rule(rule)
    return rules, defs


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
    timeout: float = 600.0,
    rule_file: Path | None = None,
    on_ready: Ready | None = None,
    on_line: Line | None = None,
    stop: threading.Event | None = None,
) -> SessionReport:
    """Serve one proxy session until stopped; return a report (recorded, or replayed and compared)."""
    record_mode = RecordMode.parse(record_mode, SESSION_MODES, " for the proxy")
    if not 0 < timeout <= 86400:
        raise ConfigError(
            f"--timeout {timeout:g}: give the seconds one upstream exchange may take (0 < S <= 86400)"
        )
    rules, defs = _rules(rules, rule_file)
    lines = SessionLines(on_line)
    rows = find_sessions(store, name, upstream, lines.note) if record_mode != "all" else []
    # the newest that may be replayed: an empty session or (when it can be re-recorded) endpoint
    # errors are never replayed as the answer
    usable = [r for r in rows if _reusable(store, r, upstream if record_mode == "once" else None)]
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
    session = _Session(store, name, rules, defs, lines, host=host, port=port, on_ready=on_ready, stop=stop)
    if existing is not None:
        episode = store.get_episode(str(existing["id"]))
        recorded_with = _recorded_rules(episode.meta)
        rule_files.check_recorded(recorded_with[1], defs, recorded_with[0])
        if record_mode == "once" and upstream:  # the upstream is the user's, never one read from the store
            return session.resume(episode, upstream, api_key_env, timeout)
        return session.replay(episode, recorded_with[0])
    if not upstream:
        raise ConfigError("recording a proxy session needs --upstream URL (or --upstream builtin)")
    return session.record(upstream, api_key_env, timeout)


def _recorded_rules(meta: EpisodeMeta) -> tuple[tuple[str, ...], dict[str, RuleDef]]:
    proxy = meta.get("proxy")
    if proxy is None:
        return (), {}
    defs = proxy.get("rule_defs") or {}
    return tuple(proxy.get("rules", ())), {
        str(k): {"pattern": str(v.get("pattern", "")), "replace": str(v.get("replace", ""))}
        for k, v in defs.items()
    }


def _models(events: list[Event]) -> list[str]:
    seen = [e.body.get("model") for e in events if isinstance(e, LlmEvent) and isinstance(e.body, dict)]
    return list(dict.fromkeys(m for m in seen if isinstance(m, str) and m))


class _Session:
    """One session's serving: record (new, or taking up a recording that stopped early) or replay."""

    def __init__(
        self,
        store: StoreBackend,
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
            return self._replayed(taken_up, server, ended)  # nothing continued it: it was a replay
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
            concurrent=True,
            on_divergence=self.lines.diverged,
            on_note=self.lines.note,
            credentials=dict(proxy.get("credentials", {})) if proxy else {},
        )
        ended = self._serve(server, "replay")
        return self._replayed(episode, server, ended)

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
