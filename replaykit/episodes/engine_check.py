"""Reuse only under the same engine: the identity a real endpoint reports now, checked
against the one each reused cassette was recorded under (``models.identity``).

A changed identity (another context size, model file, chat template, engine version,
deterministic flag) stops the run with one line naming what changed, unless
``model.accept_engine_change`` (``--accept-engine-change``) says to reuse anyway.
Cassettes recorded before identities were measured, and the built-in server, are not
checked.
"""

from __future__ import annotations

from typing import Any

from replaykit.cassette.backend import StoreBackend
from replaykit.core.errors import ConfigError, EngineChanged
from replaykit.episodes.config import ModelConfig
from replaykit.models.endpoint import BUILTIN, api_key
from replaykit.models.identity import identity_changes, identity_digest, measure_identity


def live_engine(model: ModelConfig, record_mode: str, persist: bool) -> dict[str, Any] | None:
    """The engine identity a real endpoint reports now (None: the built-in server, replay-only
    modes, no key at hand, or an endpoint that does not answer)."""
    if model.base_url == BUILTIN or record_mode == "none" or not persist:
        return None
    try:
        key = api_key(model)
    except ConfigError:
        return None  # recording will say so, if anything has to be recorded
    return measure_identity(model.base_url, key)


def check_engine(store: StoreBackend, reused: list[str], live: dict[str, Any], model: ModelConfig) -> None:
    """Stop when a cassette about to be reused was recorded under another engine identity."""
    if model.accept_engine_change:
        return
    live_digest = identity_digest(live)
    for cassette_id in reused:
        recorded = (store.get_episode(cassette_id).meta.get("model") or {}).get("engine")
        if recorded is None or identity_digest(recorded) == live_digest:
            continue  # recorded before identities were measured, or the same engine
        changed = "; ".join(identity_changes(recorded, live)[:3])
        raise EngineChanged(
            f"{model.base_url} reports another engine than cassette {cassette_id} was recorded under "
            f"({changed}); rerun with --record-mode all to re-record, or --accept-engine-change to reuse"
        )
