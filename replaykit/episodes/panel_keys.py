"""The cassette keys a measure looks up, and where each part of them comes from.

A key is derived here where it can be: the task's content digest, the model as it is served
(``models.endpoint.model_id``: ``builtin``, the engine measured now, a hosted API by its URL)
and the env kind's extras (docker: the task image's recipe). Where a part cannot be derived
on this machine without recording — a replay-only mode never measures an engine, an engine
that does not answer cannot be measured, a docker task image is not built here or no daemon
answers — it is taken from the store: the recorded cassettes of the same episode (harness
SHA, task and its content, model name and revision, seed, config), each one's id derived
again from the key it claims (a row whose id is not its key's is not believed). Keys of
format 1 (a URL, a local image ID) are found the same way, and a format-1 cassette whose key
holds what the derived one holds (the built-in model, the local kind) is reused as it is.

Measuring live, a cassette of the same episode recorded under another measured engine stops
the run with one line naming what changed (``--accept-engine-change`` reuses it).

A training's replay derives nothing: its keys are its first run's recorded keys at each
harness SHA (:func:`template_keys`), so it needs no task folder, engine or Docker.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from replaykit.cassette.backend import EpisodeStore, StoreBackend
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.lineage import FORK_MESSAGE, FORK_STEP, FORKED_FROM
from replaykit.core.determinism import digest_of
from replaykit.core.errors import CassetteNotFound, EngineChanged, EnvError, StoreCorrupt, TaskError
from replaykit.core.records import JSON
from replaykit.envs.registry import env_key_extra
from replaykit.envs.tasks import Task
from replaykit.episodes.config import RunConfig
from replaykit.models.config import ModelConfig
from replaykit.models.endpoint import is_engine, model_id
from replaykit.models.identity import identity_changes

#: extras that make a cassette another episode's descendant (a fork, a regrade): never the
#: recording a key is taken from
LINEAGE = frozenset({FORKED_FROM, FORK_STEP, FORK_MESSAGE, "regraded_from", "verifier"})


@dataclass
class RecordedKeys:
    """Where a measure's keys come from when a part of them cannot be derived here (see the
    module doc). ``endpoint_known``: the model's part was derived (built-in, or the engine
    measured now: ``live``); ``replaying``: record mode none."""

    store: StoreBackend
    replaying: bool
    endpoint_known: bool
    live: dict[str, JSON] | None = None
    base_url: str = ""
    accept_engine_change: bool = False
    taken: list[str] = field(default_factory=list)  # tasks whose env extras came from the recording
    cause: str = ""

    def key(self, derived: CassetteKey, extras_known: bool, cause: str = "") -> CassetteKey:
        """The key to look up for ``derived``: itself when the store holds it (or nothing else
        can stand for it), else the recorded key of the same episode it stands for."""
        if self.store.has(derived.id):
            return derived
        recorded = self._recorded(derived)
        fits = [
            k
            for k in recorded
            if (k.model.endpoint == derived.model.endpoint or not self.endpoint_known)
            # an older key's extras (format 1: the recorder's image ID) cannot be compared here
            and (
                k.extra == derived.extra or not extras_known or (self.replaying and k.format < derived.format)
            )
        ]
        if fits:
            chosen = _one(derived, fits)
            if chosen.extra != derived.extra and cause:
                self.taken.append(derived.task_id)
                self.cause = cause.split("; ")[0]  # what failed, without the advice to record live
            return chosen
        if not extras_known:
            what = (
                "no recorded cassette"
                if not recorded
                else f"{len(recorded)} recorded cassette(s) of other keys"
            )
            raise EnvError(
                f"{cause} (replaying task {derived.task_id}: {what} to take its key from)"
            ) from None
        others = [k for k in recorded if k.extra == derived.extra and is_engine(k.model.endpoint)]
        if others and not self.replaying and is_engine(derived.model.endpoint):
            return self._other_engine(derived, others[-1])
        return derived

    def _recorded(self, derived: CassetteKey) -> list[CassetteKey]:
        """The recorded keys of ``derived``'s episode (any engine, extras, format), oldest first,
        each believed only when its row's id is its key's."""
        found: list[CassetteKey] = []
        for row in self.store.find_keyed(derived):
            try:
                key = CassetteKey.from_canonical(json.loads(row["key_json"]))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # unreadable: reading that cassette says why
            if key.id != row["id"] or any(name in LINEAGE for name, _ in key.extra):
                continue
            if key.kind == derived.kind and key not in found:
                found.append(key)
        return found

    def _other_engine(self, derived: CassetteKey, recorded: CassetteKey) -> CassetteKey:
        """A cassette of this episode recorded under another engine: reused with
        ``--accept-engine-change``, else the run stops naming what changed."""
        if self.accept_engine_change:
            return recorded
        model = self.store.get_episode(recorded.id).meta.get("model")
        before = (model.get("engine") if model else None) or {}
        changed = "; ".join(identity_changes(before, self.live or {})[:3]) or "another engine identity"
        raise EngineChanged(
            f"{self.base_url} reports another engine than cassette {recorded.id} was recorded under "
            f"({changed}); rerun with --record-mode all to re-record, or --accept-engine-change to reuse"
        )

    def note(self) -> str | None:
        """One line saying which tasks' env keys were taken from the recording, and why."""
        if not self.taken:
            return None
        return (
            f"{self.cause}: replaying {len(set(self.taken))} task(s) with the env keys they were recorded "
            "with (their images not checked on this machine)"
        )


def _one(derived: CassetteKey, keys: list[CassetteKey]) -> CassetteKey:
    """The recorded key ``derived`` stands for: the one that holds what it holds, else the only
    one (of the newest key format); several: one line saying which to replay instead."""
    exact = [k for k in keys if k.model.endpoint == derived.model.endpoint and k.extra == derived.extra]
    if exact:
        return exact[-1]
    newest = max(k.format for k in keys)
    keys = [k for k in keys if k.format == newest]
    if len(keys) == 1:
        return keys[0]
    served = sorted({k.model.endpoint for k in keys})
    raise CassetteNotFound(
        f"task {derived.task_id} seed {derived.seed} at harness {derived.harness_sha[:10]} is recorded "
        f"{len(keys)} times under other engines or images ({', '.join(served)}); replay the run that "
        "holds the one you want (replaykit replay RUN_ID)"
    )


def episode_keys(
    config: RunConfig,
    sha: str,
    tasks: list[Task],
    model_cfg: ModelConfig,
    unprepared: dict[str, str] | None = None,
    recorded: RecordedKeys | None = None,
    mid: ModelId | None = None,
) -> list[tuple[CassetteKey, Task]]:
    """The panel's cassette keys (``mid``: the model as it is served; default: as the config
    names it, no engine measured). A task whose environment cannot be prepared (its image does
    not build, its compose file is refused) raises, unless ``unprepared`` collects it
    (``--keep-going``; a task refused at load is in it already): its message, by task id, and
    keys marked ``unprepared`` (with the message's digest) for its infra episodes. With
    ``recorded``, what cannot be derived here is taken from the store (see the module doc)."""
    mid = mid or model_id(model_cfg)
    digest = config.digest()
    env = config.env
    replaying = recorded is not None and recorded.replaying
    keys: list[tuple[CassetteKey, Task]] = []
    for task in tasks:
        cause = ""
        try:
            if unprepared is not None and task.id in unprepared:  # refused at load: nothing to build
                raise TaskError(unprepared[task.id])
            extra = env_key_extra(env, task, replaying=replaying)  # a replay never builds
        except (EnvError, TaskError) as exc:
            if replaying and isinstance(exc, EnvError):
                cause, extra = str(exc), (("env", env.kind),)
            elif unprepared is None:
                raise
            else:
                message = unprepared.setdefault(task.id, f"task {task.id}: {exc}")
                named = message.replace(str(task.path), "<task>")  # what failed, not where the task is
                extra = (("env", config.env.kind), ("unprepared", digest_of(named)[:16]))
        for seed in config.panel.seed_list:
            key = CassetteKey(sha, task.id, task.digest, mid, seed, digest, extra=extra)
            if recorded is not None:
                key = recorded.key(key, extras_known=not cause, cause=cause)
            keys.append((key, task))
    return keys


def template_keys(store: EpisodeStore, cassettes: list[str]) -> list[CassetteKey]:
    """A recorded run's keys (its cassettes' rows, each id derived again): a training's panel as
    it was measured, which ``replace(key, harness_sha=…)`` turns into any other SHA's keys."""
    keys = []
    for cassette_id in cassettes:
        key = CassetteKey.from_canonical(json.loads(store.cassette_row(cassette_id)["key_json"]))
        if key.id != cassette_id:
            raise StoreCorrupt(
                f"cassette {cassette_id}: its key is not the one its id names", "", store.location
            )
        keys.append(key)
    return keys


def at_sha(template: list[CassetteKey], sha: str) -> list[CassetteKey]:
    return [dataclasses.replace(k, harness_sha=sha) for k in template]
