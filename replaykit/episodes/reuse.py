"""Prefix reuse: when it is sound, and which recorded episodes may donate to a new one.

Measuring a harness live, an episode recorded for the same task (and task content), seed,
model, config and environment key under another harness SHA — with the same engine
identity — is a *donor*: the new episode is served its answers while it repeats it
(``capture/donor.py``), and is its own cassette, keyed by its own SHA, saying what it was
served (``cassette/lineage.py``). Donors are taken the baseline's first, then the newest;
one that fails verification is one warning line and is not used.

A served answer is a recorded sample for an identical request: exact on a deterministic
engine (the built-in server; a real engine whose saved probe for this identity, model and
temperature says deterministic), a shared sample — common random numbers — elsewhere. So
``model.reuse`` (``--reuse``) defaults to ``prefix`` on a deterministic engine and ``none``
elsewhere (and under record mode ``all``, which re-records every call).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypedDict

from replaykit.capture.failures import stored_endpoint_failure
from replaykit.cassette.backend import BrowseStore, RunStore
from replaykit.cassette.events import Episode
from replaykit.cassette.keys import CassetteKey
from replaykit.cassette.lineage import EXACT, SHARED_SAMPLE
from replaykit.core.errors import StoreCorrupt
from replaykit.core.records import JSON
from replaykit.episodes.engine_check import last_probe
from replaykit.models.config import ModelConfig
from replaykit.models.endpoint import BUILTIN
from replaykit.models.identity import identity_digest

#: donors offered to one episode (equal recordings count once)
MAX_DONORS = 4


class ReuseDoc(TypedDict):
    """How a measure reused (``run --json``'s ``reuse``): the policy, what a served answer is, why."""

    policy: str  # prefix | none
    basis: str  # exact | shared sample
    reason: str


@dataclass(frozen=True)
class ReusePolicy:
    policy: str
    basis: str
    reason: str

    @property
    def prefix(self) -> bool:
        return self.policy == "prefix"

    def to_dict(self) -> ReuseDoc:
        return {"policy": self.policy, "basis": self.basis, "reason": self.reason}


def determinism(store: BrowseStore, model: ModelConfig, engine: dict[str, JSON] | None) -> tuple[bool, str]:
    """Is the engine deterministic, and why it is taken to be (or not)."""
    if model.base_url == BUILTIN:
        return True, "the built-in reference server is deterministic"
    if engine is None:
        return False, "this endpoint's engine identity was not measured"
    probe = last_probe(store, model, engine)
    if probe is None:
        return False, "no saved probe of this engine (`replaykit probe --config CFG --save`)"
    if probe.get("verdict") == "deterministic":
        return True, f"probe {probe['probe_id']} found this engine deterministic"
    return False, f"probe {probe['probe_id']} found this engine {probe.get('verdict', 'nondeterministic')}"


def reuse_policy(
    store: BrowseStore, model: ModelConfig, engine: dict[str, JSON] | None, record_mode: str
) -> ReusePolicy:
    """``model.reuse`` when set, else the default for this engine and record mode."""
    exact, why = determinism(store, model, engine)
    basis = EXACT if exact else SHARED_SAMPLE
    if model.reuse is not None:
        note = "" if model.reuse == "none" or exact else f": a shared sample ({why})"
        return ReusePolicy(model.reuse, basis, f"model.reuse is {model.reuse}{note}")
    if record_mode == "all":
        return ReusePolicy("none", basis, "record mode all re-records every call")
    return ReusePolicy("prefix" if exact else "none", basis, f"default: {why}")


def _comparable(key: CassetteKey) -> CassetteKey:
    return replace(key, harness_sha="")


def _engine_of(episode: Episode) -> str:
    model = episode.meta.get("model")
    engine = model.get("engine") if isinstance(model, dict) else None
    return identity_digest(engine) if engine else ""


def find_donors(
    store: RunStore,
    key: CassetteKey,
    engine: dict[str, JSON] | None,
    baseline_sha: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[Episode]:
    """The episodes that may donate to ``key``'s: the baseline's first, then the newest;
    graded (no infra failure, no endpoint error), of the same key but for the SHA, recorded
    under the same engine identity, each distinct recording once, at most ``MAX_DONORS``."""
    rows = store.find_donors(key)
    rows.sort(key=lambda r: r["harness_sha"] != baseline_sha)  # stable: newest first after it
    live = identity_digest(engine) if engine else ""
    donors: list[Episode] = []
    digests: set[str] = set()
    for row in rows:
        if len(donors) >= MAX_DONORS:
            break
        if row["infra_failure"] or row["digest"] in digests:
            continue
        try:
            episode = store.get_episode(row["id"])
            failed = stored_endpoint_failure(store.get_json(row["doc"]))
        except StoreCorrupt as exc:
            if warn is not None:
                warn(
                    f"warning: donor cassette {row['id']} ({key.task_id}#{key.seed}, harness "
                    f"{row['harness_sha'][:10]}) fails verification, not reused: {exc.what}"
                )
            continue
        if failed or _comparable(episode.key) != _comparable(key) or _engine_of(episode) != live:
            continue
        digests.add(row["digest"])
        donors.append(episode)
    return donors
