"""Reuse only under the same engine: the identity a real endpoint reports now, measured before
any key is looked up (a self-hosted engine's names the model in its keys: ``models.endpoint``),
and checked against the one each reused cassette was recorded under (``models.identity``).

A changed identity (another context size, model file, chat template, engine version,
deterministic flag) stops the run with one line naming what changed (``panel_keys``: a cassette
of the same episode under another engine; here: a reused one whose recorded identity differs),
unless ``model.accept_engine_change`` (``--accept-engine-change``) says to reuse anyway.
Cassettes recorded before identities were measured, and the built-in server, are not
checked. An endpoint that does not answer its identity check (stopped, no key at hand) leaves
the cassettes a run reuses unchecked (their keys taken from the recording): one line says so.

The last saved probe (``replaykit probe --save``) of this endpoint, model and identity at
the run's temperature is consulted too: when it was not deterministic the run warns, or
with ``model.require_deterministic`` refuses. A self-hosted engine never probed at this
identity is probed first, at the run's own concurrency (``executor.workers``), and the
result kept in the store for the next run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from replaykit.cassette.backend import BrowseStore, DocumentStore, EpisodeStore
from replaykit.core.errors import ConfigError, EngineChanged, ModelError
from replaykit.core.records import JSON
from replaykit.models.config import ModelConfig
from replaykit.models.endpoint import BUILTIN, api_key
from replaykit.models.identity import identity_changes, identity_digest, measure_identity
from replaykit.models.probe import ProbeResult

#: the identity measurement's own bound per request; the whole of it (about five requests)
#: gets twice that, and never more than one model call may take (``model.timeout_s``)
IDENTITY_TIMEOUT_S = 5.0
#: the probe a run makes of an engine never probed: at most this many connections at once,
#: twice as many requests per phase, replies of at most this many tokens
MAX_PROBE_CONCURRENCY = 4
PROBE_MAX_TOKENS = 16


def live_engine(model: ModelConfig, record_mode: str, persist: bool) -> dict[str, JSON] | None:
    """The engine identity a real endpoint reports now (None: the built-in server, replay-only
    modes, no key at hand, or an endpoint that does not answer). Measuring it takes at most
    ``min(10 s, model.timeout_s)``: an endpoint that trickles its answers costs a run no more
    before its first call than the call itself may take."""
    if model.base_url == BUILTIN or record_mode == "none" or not persist:
        return None
    try:
        key = api_key(model)
    except ConfigError:
        return None  # recording will say so, if anything has to be recorded
    timeout = min(IDENTITY_TIMEOUT_S, model.timeout_s / 2)  # measure_identity's total deadline is twice this
    return measure_identity(
        model.base_url,
        key,
        model.name,
        timeout=timeout,
        params=model.params.sent(),
        canary_timeout=model.timeout_s,  # the canary is a model call: bounded like one
    )


def unchecked_note(model: ModelConfig, record_mode: str, persist: bool, reusing: int) -> str | None:
    """One line when a run is about to reuse cassettes of a real endpoint whose identity it
    could not measure (``live_engine`` gave None): they are reused unchecked, and it says so."""
    if model.base_url == BUILTIN or record_mode in ("none", "all") or not persist or reusing == 0:
        return None
    try:
        api_key(model)
        why = "it did not answer"
    except ConfigError:
        why = "no API key at hand to ask it"
    return (
        f"{model.base_url}: engine identity not checked ({why}); {reusing} cassette(s) reused "
        "without knowing whether the engine serving it now is the one that recorded them"
    )


def check_engine(store: EpisodeStore, reused: list[str], live: dict[str, JSON], model: ModelConfig) -> None:
    """Stop when a cassette about to be reused was recorded under another engine identity."""
    if model.accept_engine_change:
        return
    live_digest = identity_digest(live)
    for cassette_id in reused:
        recorded_model = store.get_episode(cassette_id).meta.get("model")
        recorded = recorded_model.get("engine") if recorded_model else None
        if recorded is None or identity_digest(recorded) == live_digest:
            continue  # recorded before identities were measured, or the same engine
        changed = "; ".join(identity_changes(recorded, live)[:3])
        raise EngineChanged(
            f"{model.base_url} reports another engine than cassette {cassette_id} was recorded under "
            f"({changed}); rerun with --record-mode all to re-record, or --accept-engine-change to reuse"
        )


def check_unchanged(before: dict[str, JSON], model: ModelConfig, record_mode: str, recorded: int) -> None:
    """The next identity check of a run that recorded: measured again once its episodes are
    in; an engine that changed meanwhile (restarted on another model file, another server on the port)
    stops the run before its document is written, so no verdict is computed from it."""
    after = live_engine(model, record_mode, True)
    if after is None or identity_digest(after) == identity_digest(before):
        return  # the same engine (or gone after its last answer: the calls said so, if it mattered)
    changed = "; ".join(identity_changes(before, after)[:3])
    raise EngineChanged(
        f"{model.base_url} changed while this run recorded ({changed}): its {recorded} new episode(s) "
        "keep the identity measured at the start, and no run was written; restart the engine as it "
        "was, or rerun with --record-mode all to record on the new one"
    )


def last_probe(store: BrowseStore, model: ModelConfig, live: dict[str, JSON]) -> ProbeResult | None:
    """The newest saved probe of this endpoint, model and engine identity at ``model.temperature``."""
    endpoint, digest = model.base_url.rstrip("/"), identity_digest(live)
    for row in store.doc_rows("probe"):
        if (row["endpoint"], row["model"], row["config_digest"]) != (endpoint, model.name, digest):
            continue
        doc = store.verified_doc(row)
        temperature = doc.get("temperature", 0.0)
        if isinstance(temperature, (int, float)) and float(temperature) == model.temperature:
            return cast(ProbeResult, doc)  # a saved probe (models.probe.save_probe), its blob verified
    return None


def probe_at_concurrency(
    store: DocumentStore, model: ModelConfig, live: dict[str, JSON], workers: int, note: Callable[[str], None]
) -> ProbeResult:
    """Probe the engine the way the run will load it: ``workers`` concurrent requests (at most 4),
    twice as many requests in all per phase, replies of at most 16 tokens, the run's temperature
    and ``model.params``; kept in the store under this identity, so the next run reuses it."""
    from replaykit.models.probe import probe, save_probe

    k = max(1, min(workers, MAX_PROBE_CONCURRENCY))
    note(
        f"probing {model.base_url} ({model.name}) at the run's concurrency ({k}): no saved probe of this engine"
    )
    result = probe(
        model.base_url,
        model.name,
        n=2 * k,
        concurrency=k,
        temperature=model.temperature,
        api_key_env=model.api_key_env,
        max_tokens=PROBE_MAX_TOKENS,
        params=model.params.sent(),
        engine=live,
    )
    save_probe(store, result)
    return result


def check_probe(
    store: BrowseStore,
    model: ModelConfig,
    live: dict[str, JSON],
    warn: Callable[[str], None],
    workers: int | None = None,
) -> ProbeResult | None:
    """Warn (or, with ``model.require_deterministic``, stop) when the last probe was not
    deterministic. With ``workers`` and no saved probe of a self-hosted engine (one measured with
    the canary), probe it first at that concurrency (``probe_at_concurrency``)."""
    probe = last_probe(store, model, live)
    if probe is None and workers is not None and "canary" in live:
        probe = probe_at_concurrency(store, model, live, workers, warn)
    if probe is None or probe.get("verdict") == "deterministic":
        return probe
    found = str(probe.get("classification", probe.get("verdict", "nondeterministic"))).replace("_", " ")
    tip = (probe.get("advice") or [""])[0]
    message = (
        f"probe {probe['probe_id']} of {probe['base_url']} ({model.name}, this engine, temperature "
        f"{model.temperature:g}) found it {found}: reruns may not reproduce these recordings"
        + (f"; {tip}" if tip else "")
    )
    if model.require_deterministic:
        raise ModelError(message + " (model.require_deterministic is set: fix the engine, then probe again)")
    warn("warning: " + message)
    return probe
