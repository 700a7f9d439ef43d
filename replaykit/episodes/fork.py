"""Fork an episode at step N: its first N model calls served from its cassette, then live.

``replaykit fork CASSETTE --at N`` runs the harness again — the parent's, or ``--harness
REF``'s — against a fresh environment of the recorded kind (built through the env
registry): the parent's answers are served for model calls 0..N-1 while the harness asks
exactly what it asked then and the environment, really executing the same actions,
reproduces the parent's observations and state digests; from call N on it goes live with
the change (``--model``, a ``--message`` given to the model at the step, ``--config``). A
difference before step N is an error: that fork does not exist (fork earlier). The fork is
a cassette of its own — its key names its parent and step (``forked_from``, ``fork_step``),
its ``meta`` says what it was served (``cassette/lineage.py``, checked by replay and
``cassettes verify``) — kept with its parent and harness tree by a ``fork`` document of the
same id, and replays offline like any cassette. The same fork asked again is reused.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from replaykit.cassette.backend import BrowseStore, RunStore, StoreBackend, StoreHandle
from replaykit.cassette.events import Episode
from replaykit.cassette.keys import CassetteKey
from replaykit.cassette.lineage import (
    EXACT,
    FORK_MESSAGE,
    FORK_STEP,
    FORKED_FROM,
    SHARED_SAMPLE,
    fork_doc,
    reused_counts,
)
from replaykit.core.determinism import digest_of, sha256_hex
from replaykit.core.errors import CassetteNotFound, ConfigError, DivergenceError, StoreError, TaskError
from replaykit.core.glossary import fork_call
from replaykit.core.meta import ForkMeta, GivenMessage, ModelSpan
from replaykit.core.records import JSON
from replaykit.envs.base import EnvSection
from replaykit.envs.extras import Extras
from replaykit.envs.limits import with_limits
from replaykit.envs.registry import env_key_extra, get_env_kind
from replaykit.envs.section import recorded_env
from replaykit.envs.tasks import Task
from replaykit.episodes.config import RunConfig
from replaykit.episodes.engine_check import live_engine
from replaykit.episodes.harness import HarnessRepo
from replaykit.episodes.limits import LimitsConfig
from replaykit.episodes.network import recording, store_bodies
from replaykit.episodes.reuse import determinism
from replaykit.episodes.rollout import EpisodeSpec, TaskView, record_episode
from replaykit.episodes.run import reusable, secrets_for
from replaykit.episodes.task_source import TaskSources
from replaykit.episodes.workspaces import clean_workspaces
from replaykit.models.config import ModelConfig, ModelParams
from replaykit.models.endpoint import is_engine, model_id, open_endpoint


@dataclass(frozen=True)
class ForkChange:
    """What the fork changes from its step on (all optional: a fork of nothing re-records)."""

    model: str | None = None  # another model name
    harness_ref: str | None = None  # another harness commit (it must repeat the first N steps)
    message: str | None = None  # a user message given to the model at the step
    config: RunConfig | None = None  # another config (endpoint, params, env, ...)
    harness_repo: Path | None = None  # where ``harness_ref`` is (default: the config's harness.repo)


class ForkResult(TypedDict):
    """``replaykit fork --json``."""

    cassette_id: str
    forked_from: str
    fork_step: int  # the parent's model calls served (--at): live from call fork_step + 1
    parent_calls: int  # the parent's model calls: forked at call fork_step + 1 of parent_calls
    recorded: bool  # False: this fork was stored already (reused, no model call)
    task_id: str
    seed: int
    harness_sha: str
    model: str
    model_calls: int  # calls that reached the endpoint (the live part)
    reused_events: int  # events 0..n-1 served from (and equal to) the parent's
    reward: float | None
    passed: bool
    infra_failure: bool
    digest: str
    store: str


def fork_episode(
    store: StoreBackend, cassette: str, at: int, change: ForkChange, sources: TaskSources | None = None
) -> ForkResult:
    """Fork ``cassette`` (an id or unique prefix) at model call ``at`` with ``change``; its task
    found by id and content digest (``task_source.py``: the store's copy, then ``sources``)."""
    if at < 0:
        raise ConfigError(
            f"--at {at}: give how many model calls to serve, 0 or more (the fork goes live at call N+1)"
        )
    if not store.exists():  # a mistyped --store: an error, never a new empty store
        raise CassetteNotFound(f"no store at {store.location}")
    parent = _parent(store, cassette, at)
    with store.leasing():
        try:  # the first write (the parent kept while the fork is made): before any model call
            store.lease("cassettes", [parent.id])
        except StoreError as exc:
            raise StoreError(
                f"store {store.location} cannot be written here, and fork writes a new cassette: {exc}"
            ) from None
        return _fork(store, parent, at, change, sources or TaskSources(store))


def _parent(store: RunStore, cassette: str, at: int) -> Episode:
    cid = store.resolve_id("cassettes", cassette, what="cassette")
    parent = store.get_episode(cid)
    meta = parent.meta
    if parent.key.kind != "episode" or "task" not in meta or "harness" not in meta:
        raise ConfigError(
            f"cassette {cid} is a {parent.key.kind} cassette, not an episode of a run: only those fork"
        )
    calls = len(parent.llm_events)
    if at >= calls:
        raise ConfigError(
            f"--at {at} is beyond the episode's end: cassette {cid} made {calls} model call(s)"
            + (f" (--at 0 to {calls - 1}: live at call 1 to {calls})" if calls else "")
        )
    return parent


@dataclass(frozen=True)
class _Plan:
    """What the fork runs: its key and fork meta, model, task, environment, config and harness."""

    key: CassetteKey
    fork: ForkMeta
    model: ModelConfig
    task: Task
    env: EnvSection
    cfg: RunConfig | None
    files: dict[str, tuple[int, bytes]] | None  # the harness tree's files, when it must be stored
    engine: dict[str, JSON] | None  # the engine identity measured (a real endpoint)


def _fork(
    store: BrowseStore, parent: Episode, at: int, change: ForkChange, sources: TaskSources
) -> ForkResult:
    cfg, meta = change.config, parent.meta
    model = _model(parent, cfg, change.model)
    task = _task(parent, cfg, sources)
    sha, files = _harness(store, parent, change)
    env = cfg.env if cfg else recorded_env(meta.get("env") or {})
    extra = [(FORKED_FROM, parent.id), (FORK_STEP, str(at))]
    if change.message is not None:
        extra.append((FORK_MESSAGE, sha256_hex(change.message)[:16]))
    fork: ForkMeta = {
        "parent": parent.id,
        "step": at,
        "models": _models(parent, at),
        "messages": _messages(parent, at, change.message),
    }
    engine = live_engine(model, "once", True)  # it names a self-hosted engine in the key
    # the env kind's extras (docker: an image built now has its fetches recorded for it)
    with recording(store, get_env_kind(env.kind), env, [task]) as extras:
        key = CassetteKey(
            sha,
            task.id,
            task.digest,
            model_id(model, engine),
            parent.key.seed,
            cfg.digest() if cfg else parent.key.config_digest,
            extra=(*env_key_extra(env, task), *extra),
        )
        recorded = not reusable(store, key.id)
        plan = _Plan(key, fork, model, task, env, cfg, files, engine)
        episode = _record(store, parent, plan, extras) if recorded else store.get_episode(key.id)
    doc = fork_doc(episode)
    if not store.has_doc(key.id, digest_of(doc)):  # asked again: the document stays as it was
        store.put_doc(
            key.id, "fork", doc, name=f"fork of {parent.id[:12]}", harness_sha=sha, model=model.name
        )
    return _result(store, parent, episode, recorded)


def _record(store: BrowseStore, parent: Episode, plan: _Plan, extras: Extras) -> Episode:
    meta, cfg, model, task, engine = parent.meta, plan.cfg, plan.model, plan.task, plan.engine
    tree = store.materialise_tree(plan.key.harness_sha, plan.files)
    clean_workspaces()
    with open_endpoint(model, task_dirs=[task.path]) as endpoint:
        spec = EpisodeSpec(
            key=plan.key,
            task_path=str(task.path),
            task=TaskView.of(task),
            tree_dir=str(tree),
            entry=cfg.harness.entry if cfg else meta["harness"]["entry"],
            params=cfg.harness.params if cfg else dict(meta["harness"]["params"]),
            temperature=model.temperature,
            base_url=endpoint.base_url,
            api_key=endpoint.api_key,
            env=plan.env,
            secrets=_secrets(parent, cfg, endpoint.api_key),
            rules=tuple(cfg.record.rules if cfg else meta.get("rules") or ()),
            api_key_env=model.api_key_env,
            timeout_s=model.timeout_s,
            max_retries=model.max_retries,
            model_params=model.params.sent(),
            engine=engine,
            extras=extras,
            # --config's limits; else the defaults (the task's agent timeout): a cassette keeps no limits
            limits=(cfg.limits if cfg else LimitsConfig()).for_task(
                with_limits(task, plan.env.limits()).agent_timeout_sec
            ),
            donors=[parent],
            reuse_basis=EXACT if determinism(store, model, engine)[0] else SHARED_SAMPLE,
            fork=plan.fork,
        )
        try:
            episode = record_episode(spec)
        except DivergenceError as exc:
            reason = str(exc).split(": ", 1)[-1]
            raise ConfigError(
                f"cassette {parent.id} cannot be forked at {fork_call(plan.fork['step'], len(parent.llm_events))} "
                f"with this change: {reason}; fork at an earlier call (a smaller --at)"
            ) from None
    if plan.files is not None:
        store.put_tree(plan.key.harness_sha, plan.files)
    store_bodies(store, episode)
    store.put_episode(episode)
    return episode


def _model(parent: Episode, cfg: RunConfig | None, name: str | None) -> ModelConfig:
    """The fork's model: the config's (``--config``), else the parent's as recorded; ``name`` renames it."""
    if cfg is not None:
        model = cfg.model
    else:
        recorded, mid = parent.meta["model"], parent.key.model
        if is_engine(mid.endpoint):  # keys name an engine by what it is, never where it listens
            raise ConfigError(
                f"cassette {parent.id} was recorded on a self-hosted engine ({mid.endpoint}) and a fork "
                "calls the model live: pass --config CFG whose model.base_url serves it"
            )
        model = ModelConfig(
            name=mid.name,
            base_url=mid.endpoint,
            revision="" if mid.endpoint == "builtin" else mid.revision,
            temperature=recorded["temperature"],
            params=ModelParams.model_validate(recorded.get("params") or {}),
            api_key_env=(parent.meta.get("secret_env") or {}).get("api_key", ""),
        )
    return model.model_copy(update={"name": name}) if name else model


def _task(parent: Episode, cfg: RunConfig | None, sources: TaskSources) -> Task:
    """The parent's task, found by id and content digest: the store's copy, ``--config``'s panel,
    ``--tasks`` (never the path it was recorded at)."""
    if cfg is not None and sources.panel is None:
        sources = dataclasses.replace(sources, panel=(tuple(cfg.panel.tasks), cfg.base_dir))
    try:
        return sources.find(parent.key.task_id, parent.key.task_digest)
    except TaskError as exc:
        raise ConfigError(f"cassette {parent.id}: {exc}") from None


def _harness(
    store: BrowseStore, parent: Episode, change: ForkChange
) -> tuple[str, dict[str, tuple[int, bytes]] | None]:
    """(harness SHA, its files when they must be stored): ``--harness REF``'s in ``--harness-repo``
    or ``--config``'s repo (never the one a run recorded: it may be another checkout's), else the
    parent's."""
    ref, cfg = change.harness_ref, change.config
    if ref is None:
        sha = parent.key.harness_sha
        if not store.has_tree(sha):
            raise StoreError(f"the harness tree {sha[:12]} of cassette {parent.id} is not in this store")
        return sha, None
    path = change.harness_repo or (cfg.repo_path if cfg else None)
    if path is None:
        raise ConfigError(
            f"--harness {ref} needs the harness repository to find it in: add --harness-repo PATH "
            "or --config CFG (its harness.repo)"
        )
    repo = HarnessRepo(path, cfg.harness.branch if cfg else "main")
    repo.ensure_clean()
    sha = repo.resolve(ref)
    return sha, None if store.has_tree(sha) else repo.tree_files(sha)


def _models(parent: Episode, at: int) -> list[ModelSpan]:
    """The model names of calls 0..at-1: the parent's (a fork's parent: its own schedule)."""
    before = parent.meta.get("fork")
    spans: list[ModelSpan] = list(before["models"]) if before else []
    spans.append({"step": before["step"] if before else 0, "model": parent.key.model.name})
    return [s for s in spans if s["step"] < at]


def _messages(parent: Episode, at: int, text: str | None) -> list[GivenMessage]:
    """The parent's messages given before step ``at``, then this fork's own."""
    before = parent.meta.get("fork")
    kept = [m for m in before["messages"] if m["step"] < at] if before else []
    return kept + ([{"step": at, "text": text}] if text is not None else [])


def _secrets(parent: Episode, cfg: RunConfig | None, key: str) -> dict[str, str]:
    import os

    if cfg is not None:
        return secrets_for(cfg, key)
    names = parent.meta.get("secret_env") or {}
    secrets = {label: os.environ.get(var, "") for label, var in names.items() if label != "api_key"}
    if key:
        secrets["api_key"] = key
    return secrets


def _result(store: StoreHandle, parent: Episode, episode: Episode, recorded: bool) -> ForkResult:
    counts = reused_counts(episode)
    grade = episode.grade
    fork = episode.meta["fork"]
    return {
        "cassette_id": episode.id,
        "forked_from": fork["parent"],
        "fork_step": fork["step"],
        "parent_calls": len(parent.llm_events),
        "recorded": recorded,
        "task_id": episode.key.task_id,
        "seed": episode.key.seed,
        "harness_sha": episode.key.harness_sha,
        "model": episode.key.model.name,
        "model_calls": len(episode.llm_events) - counts.calls if recorded else 0,
        "reused_events": counts.events,
        "reward": grade.reward if grade else None,
        "passed": bool(grade and grade.passed),
        "infra_failure": bool(grade and grade.infra_failure),
        "digest": episode.digest,
        "store": store.location,
    }
