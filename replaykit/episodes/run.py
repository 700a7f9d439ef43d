"""Measure a harness on a panel (record or reuse cassettes).

``measure`` is the forward pass: one harness SHA × one model × a panel of tasks ×
seeds → a Run that lists its cassettes. Under record mode ``once`` an episode
whose key is already in the store is reused, not re-run. Replaying a run offline is
``replay.py`` (``replay_run``, ``replay_runs``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from replaykit.capture.failures import stored_endpoint_failure
from replaykit.cassette.backend import EpisodeStore, RunStore, StoreBackend, StoreHandle
from replaykit.cassette.keys import CassetteKey
from replaykit.cassette.lineage import reused_counts
from replaykit.cassette.stores import open_store
from replaykit.core.errors import CassetteNotFound, HarnessError
from replaykit.core.meta import AgentMeta
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress
from replaykit.core.records import JSON
from replaykit.envs.extras import Extras
from replaykit.envs.limits import with_limits
from replaykit.envs.registry import get_env_kind
from replaykit.envs.tasks import Task, load_panel
from replaykit.episodes.agents import LOCAL_AGENT_NOTE, agent_identity, reuse_note
from replaykit.episodes.config import RunConfig
from replaykit.episodes.engine_check import (
    check_engine,
    check_probe,
    check_unchanged,
    live_engine,
    unchecked_note,
)
from replaykit.episodes.harness import HarnessRepo
from replaykit.episodes.harness_at import harness_sha, stored_harness
from replaykit.episodes.network import recording, store_bodies
from replaykit.episodes.panel_keys import RecordedKeys, at_sha, episode_keys
from replaykit.episodes.reuse import ReusePolicy, find_donors, reuse_policy
from replaykit.episodes.rollout import EpisodeSpec, TaskView, record_episode
from replaykit.episodes.run_document import put_run_once, run_document, task_trees
from replaykit.episodes.run_records import MeasureResult
from replaykit.episodes.workspaces import clean_workspaces
from replaykit.execution.select import make_executor
from replaykit.models.config import ModelConfig
from replaykit.models.endpoint import BUILTIN, model_id, open_endpoint

__all__ = [
    "check_record_mode",
    "measure",
    "measure_recorded",
    "open_harness",
    "reusable",
    "secrets_for",
]


def check_record_mode(mode: str) -> RecordMode:
    return RecordMode.parse(mode)


def secrets_for(config: RunConfig, api_key: str) -> dict[str, str]:
    secrets = {name: os.environ.get(name, "") for name in config.record.secrets}
    if api_key:
        secrets["api_key"] = api_key
    return secrets


def reusable(store: RunStore, cassette_id: str) -> bool:
    """A stored cassette that may stand for its key: present, not an infra failure, and
    holding no endpoint error (older versions stored those as ordinary results)."""
    if not store.has(cassette_id):
        return False
    row = store.cassette_row(cassette_id)
    if row["infra_failure"]:
        return False
    return not stored_endpoint_failure(store.get_json(row["doc"]))


def open_harness(config: RunConfig, create: bool = True) -> HarnessRepo:
    """The harness repo; materialised from ``harness.template`` only when ``create`` (never
    under record mode ``none``: a mistyped ``harness.repo`` must not silently become a new repo)."""
    if not create and not config.repo_path.exists():
        raise HarnessError(
            f"harness repo {config.repo_path} does not exist; record mode none never creates one "
            "(check harness.repo, or run once with --record-mode once to create it from its template)"
        )
    return HarnessRepo.open(config.repo_path, config.harness.branch, config.harness.template_source())


def run_store(config: RunConfig, record_mode: RecordMode) -> StoreBackend:
    """The config's store; under record mode ``none`` (replay only) it must exist already:
    replay-only modes never create one."""
    store = open_store(config.store_location)
    if record_mode == RecordMode.NONE and not store.exists():
        raise config.field_error(
            ("store",),
            f"no store at {config.store_location}; record mode none replays only and never creates "
            "one (check store:, or record it first with --record-mode once)",
        )
    return store


def measure(
    config: RunConfig,
    *,
    record_mode: RecordMode = RecordMode.ONCE,
    harness_ref: str | None = None,
    model: ModelConfig | None = None,
    progress: Progress | None = None,
    store: StoreBackend | None = None,
    sha: str | None = None,
    keep_going: bool = False,
    persist: bool = True,
    baseline_sha: str | None = None,
    document: bool = True,
    report: bool = False,
) -> MeasureResult:
    """Measure one harness commit (default: the baseline branch HEAD) on the panel.

    ``persist=False`` writes nothing: no tree, no run document. Persisting, what it writes or
    reuses is leased until the run document names it, so a concurrent ``gc`` or ``cassettes
    rm`` cannot take it. Under prefix reuse an episode recorded now is served what a donor of
    ``baseline_sha`` (default: the branch HEAD), or else the newest, recorded for the same key
    under another SHA (``reuse.py``). A training's replay measures nothing: ``measure_recorded``.
    ``document=False`` records (or reuses) the episodes but stores no run document: a part of a
    panel another document names by its cassettes (a training's smoke run). ``report``: its rows
    as ``replaykit run`` reports them (``run_report.py``), so ``to_json()`` is ``run --json``."""
    mode = check_record_mode(record_mode)
    if not keep_going:  # a task that does not load is one line before the store is made
        load_panel(config.panel.tasks, config.base_dir)
    store = store or run_store(config, mode)
    args = (
        config,
        mode,
        harness_ref,
        model,
        progress,
        store,
        sha,
        keep_going,
        persist,
        baseline_sha,
        document,
    )
    if not persist:
        result = _measure(*args)
    else:
        with store.leasing():
            result = _measure(*args)
    if report:
        from replaykit.episodes.run_report import with_outcomes

        result.reported, result.store = with_outcomes(store, result.rows()), config.store_location
    return result


def measure_recorded(
    config: RunConfig, store: EpisodeStore, sha: str, template: list[CassetteKey], repo_path: str
) -> MeasureResult:
    """A recorded training's run at ``sha``, from its cassettes alone: the keys of its first run
    (``template``) at this SHA (``panel_keys.template_keys``). Nothing is derived, measured,
    built or written, so a replay needs no task folder, engine or Docker."""
    keys = at_sha(template, sha)
    absent = [k for k in keys if not store.has(k.id)]
    if absent:
        k = absent[0]
        raise CassetteNotFound(
            f"replay: harness {sha[:10]} was never measured on task {k.task_id} seed {k.seed} (key {k.id}) "
            f"in store {store.location}: the replay took another path than the recording, or the store "
            "lacks part of it (import its bundle again)"
        )
    pairs: list[tuple[CassetteKey, Task | None]] = [
        (k, None) for k in keys
    ]  # run_document reads only the keys
    return MeasureResult(
        run_document(config, store, sha, config.model, pairs, repo_path), [], [k.id for k in keys]
    )


def _measure(
    config: RunConfig,
    record_mode: RecordMode,
    harness_ref: str | None,
    model: ModelConfig | None,
    progress: Progress | None,
    store: StoreBackend,
    sha: str | None,
    keep_going: bool,
    persist: bool,
    baseline_sha: str | None,
    document: bool = True,
) -> MeasureResult:
    model = model or config.model
    agent = agent_identity(config.harness.agent, needed=record_mode != "none")  # before anything is made
    sha = sha or stored_harness(store, harness_ref, record_mode)
    repo = None if sha and record_mode == "none" else open_harness(config, create=record_mode != "none")
    sha = harness_sha(config, repo, store, sha, harness_ref, persist)
    baseline_sha = baseline_sha or (repo.resolve() if repo else sha)
    unprepared: dict[str, str] = {}  # --keep-going: task id -> why its episodes are infra
    tasks = load_panel(config.panel.tasks, config.base_dir, unprepared if keep_going else None)
    trees = task_trees(store, tasks) if persist else []  # a bundle of the run carries its tasks
    env = config.env
    recorder = store if persist and record_mode != RecordMode.NONE else None
    # the env kind's extras (docker: a task image built now has its fetches recorded for it)
    with recording(recorder, get_env_kind(config.env.kind), env, tasks) as extras:
        engine = live_engine(model, record_mode, persist)  # before any key: it names the model
        found = (  # record mode all records every key as derived now
            None
            if record_mode == RecordMode.ALL
            else RecordedKeys(
                store,
                replaying=record_mode == RecordMode.NONE,
                endpoint_known=model.base_url == BUILTIN or engine is not None,
                live=engine,
                base_url=model.base_url,
                accept_engine_change=model.accept_engine_change,
            )
        )
        mid = model_id(model, engine)
        keys = episode_keys(config, sha, tasks, model, unprepared if keep_going else None, found, mid)
        if found is not None and (note := found.note()):
            _warner(progress)(note)
        for message in unprepared.values():  # --keep-going: that task's episodes are infra, the rest runs
            _warner(progress)(f"infra: {message}")
        if persist:  # the cassettes the run document will list, reused ones included
            store.lease("cassettes", [k.id for k, _ in keys])
        missing = _missing(store, keys, record_mode)
        missing_ids = {k.id for k, _ in missing}
        reused = [k.id for k, _ in keys if k.id not in missing_ids]
        _check_engine(store, model, engine, record_mode, persist, reused, _warner(progress))
        probed = None
        if engine is not None and missing:
            probed = check_probe(
                store, model, engine, _warner(progress), workers=config.executor.settings.concurrency()
            )
        policy = reuse_policy(store, model, engine, record_mode)
        if missing and (record_mode == "none" or not persist):
            raise _not_recorded(missing[0], record_mode, store)
        reuse_note(store, reused, agent, _warner(progress))
        if agent is not None and missing and config.env.kind == "local":
            _warner(progress)(LOCAL_AGENT_NOTE)
        if progress:
            progress("plan", {"total": len(keys), "missing": len(missing)})
        how = _Recording(engine, keep_going, extras, unprepared, progress, policy, baseline_sha, agent)
        paid = _record(config, store, sha, model, tasks, missing, how)
    if engine is not None and paid.recorded:
        check_unchanged(engine, model, record_mode, len(paid.recorded))
    result = MeasureResult(
        run_document(
            config, store, sha, model, list(keys), str(repo.path if repo else config.repo_path), trees
        ),
        paid.recorded,
        reused,
        engine,
        probed,
        policy,
        paid.model_calls,
        paid.reused_events,
        agent,
    )
    if persist and document:
        put_run_once(store, result.run)
    return result


def _check_engine(
    store: EpisodeStore,
    model: ModelConfig,
    engine: dict[str, JSON] | None,
    record_mode: RecordMode,
    persist: bool,
    reused: list[str],
    warn: Callable[[str], None],
) -> None:
    """Each cassette about to be reused checked against the engine measured now (a hosted API's
    listed model, which keys do not name); one line when it could not be measured."""
    if engine is None:
        if note := unchecked_note(model, record_mode, persist, len(reused)):
            warn(note)
    elif record_mode != "all":
        check_engine(store, reused, engine, model)


def _missing(
    store: RunStore, keys: list[tuple[CassetteKey, Task]], record_mode: RecordMode
) -> list[tuple[CassetteKey, Task]]:
    """The episodes to record: all (``all``), those without a reusable cassette, or (``none``)
    those without any cassette."""
    if record_mode == "none":
        return [(k, t) for k, t in keys if not store.has(k.id)]
    return [(k, t) for k, t in keys if record_mode == "all" or not reusable(store, k.id)]


def _not_recorded(
    first: tuple[CassetteKey, Task], record_mode: RecordMode, store: StoreHandle
) -> CassetteNotFound:
    """A run that may not record, missing an episode: which, and how to record it."""
    k, t = first
    if record_mode == "none":
        return CassetteNotFound(
            f"record mode none replays only: no cassette for task {t.id} seed {k.seed} at harness "
            f"{k.harness_sha[:10]} (key {k.id}) in store {store.location}; import the bundle that "
            "holds it, or record it with --record-mode once"
        )
    return CassetteNotFound(f"replay: no cassette for task {t.id} seed {k.seed} (key {k.id})")


@dataclass(frozen=True)
class _Recording:
    """How a run records its missing episodes."""

    engine: dict[str, JSON] | None
    keep_going: bool
    extras: Extras  # the env kind's extras for each episode (envs/extras.py)
    unprepared: dict[str, str]  # task id -> why its environment could not be prepared (infra episodes)
    progress: Progress | None
    reuse: ReusePolicy  # prefix reuse: each episode's donors (reuse.py)
    baseline_sha: str  # whose recordings donate first
    agent: AgentMeta | None = None  # kept in each episode's meta


@dataclass
class _Paid:
    """What recording the missing episodes cost: the ids recorded, the calls sent, the events served."""

    recorded: list[str] = field(default_factory=list)
    model_calls: int = 0
    reused_events: int = 0


def _record(
    config: RunConfig,
    store: RunStore,
    sha: str,
    model: ModelConfig,
    tasks: list[Task],
    missing: list[tuple[CassetteKey, Task]],
    how: _Recording,
) -> _Paid:
    """Record the missing episodes on the config's executor; the driver stores each (their
    network bodies streamed into blobs first). The ids recorded, in order, and what they cost."""
    paid = _Paid()
    if not missing:
        return paid
    clean_workspaces()  # what killed runs left (half-removed workspaces, unheld lock files)
    tree = str(store.materialise_tree(sha))
    env = config.env
    warn = _warner(how.progress)
    with open_endpoint(model, task_dirs=[t.path for t in tasks]) as endpoint:
        secrets = secrets_for(config, endpoint.api_key)
        specs = [
            EpisodeSpec(
                key=k,
                task_path=str(t.path),
                task=TaskView.of(t),
                tree_dir=tree,
                entry=config.harness.entry,
                params=config.harness.params,
                temperature=model.temperature,
                base_url=endpoint.base_url,
                api_key=endpoint.api_key,
                env=env,
                secrets=secrets,
                rules=tuple(config.record.rules),
                keep_going=how.keep_going,
                api_key_env=model.api_key_env,
                timeout_s=model.timeout_s,
                max_retries=model.max_retries,
                model_params=model.params.sent(),
                engine=how.engine,
                extras=how.extras,
                unprepared=how.unprepared.get(t.id, ""),
                limits=config.limits.for_task(with_limits(t, env.limits()).agent_timeout_sec),
                donors=find_donors(store, k, how.engine, how.baseline_sha, warn) if how.reuse.prefix else [],
                reuse_basis=how.reuse.basis,
                agent=how.agent,
            )
            for k, t in missing
        ]
        executor = make_executor(config.executor, get_env_kind(config.env.kind).node_needs(env))
        for spec, episode in executor.map(record_episode, specs):
            store_bodies(store, episode)  # network bodies streamed into blobs first
            store.put_episode(episode)
            paid.recorded.append(spec.key.id)
            served = reused_counts(episode)
            calls = len(episode.llm_events) - served.calls
            paid.model_calls += calls
            paid.reused_events += served.events
            if how.progress:
                how.progress(
                    "episode",
                    {
                        "task_id": spec.key.task_id,
                        "seed": spec.key.seed,
                        "grade": episode.grade,
                        "model_calls": calls,
                        "reused_events": served.events,
                    },
                )
    return paid


def _warner(progress: Progress | None) -> Callable[[str], None]:
    """Warnings go where notes go (the progress callback), else to Python's warnings."""
    if progress is not None:
        return lambda text: progress("note", {"message": text})
    return lambda text: warnings.warn(text, RuntimeWarning, stacklevel=3)
