"""Re-grading a run offline: each episode's verifier runs again on its recorded final state.

No model is called. Each episode's final state is rebuilt in a fresh environment of the
kind it was recorded in (``make_env`` on the recorded ``env`` table, through the env
registry; no kind is named here): restored from its last full snapshot (``env.snapshot:
full``, when the environment can restore one: ``RestorableEnvironment``), else by running
its recorded actions again as certify does (a multi-step task staged and graded step by
step). The rebuilt state must have the recorded state digest; where it has not, that
episode's new grade is an infrastructure failure saying so. Then the task's verifier runs
— the recorded one, or, with ``tests={task: DIR}``, a task whose ``tests/`` is ``DIR``.

The result is a new run (``regraded_from`` names the original) of new cassettes: the
original events with the new grade, keyed by the original key plus ``regraded_from`` (the
original cassette) and ``verifier`` (the digest of the tests run). The original run and its
cassettes are never touched, and both replay as before. An infrastructure failure (never
graded) keeps its grade. Everything is checked before anything is written.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from replaykit.cassette.backend import BlobStore, RunStore
from replaykit.cassette.events import Episode, GradeEvent
from replaykit.cassette.outcomes import classify, is_legacy, outcome_of
from replaykit.core.determinism import digest_of
from replaykit.core.errors import ConfigError, EnvError, ReplaykitError, StoreCorrupt, TaskError
from replaykit.core.files import copy_tree, file_sha256
from replaykit.core.meta import EpisodeMeta
from replaykit.core.progress import Progress
from replaykit.core.run_doc import EpisodeSummary, RunDoc
from replaykit.envs.base import RestorableEnvironment
from replaykit.envs.extras import Extras
from replaykit.envs.registry import get_env_kind, make_env
from replaykit.envs.results import Grade
from replaykit.envs.tasks import Task, load_task
from replaykit.episodes import network
from replaykit.episodes.certificate_lookup import env_kind
from replaykit.episodes.reexecute import StepPlan, forked_reason, recorded_spec
from replaykit.episodes.rollout import replay_scrubber
from replaykit.episodes.run_document import episode_summary, reuse_basis
from replaykit.episodes.task_source import TaskSources
from replaykit.episodes.workspaces import episode_lock


class RegradedEpisode(TypedDict):
    task_id: str
    seed: int
    cassette_id: str  # the new cassette
    regraded_from: str  # the original cassette
    restored: str  # snapshot | re-execution | not regraded (infra)
    recorded_reward: float
    reward: float
    passed: bool
    outcome: str
    same: bool  # reward, passed and infrastructure failure as recorded
    detail: str


class RegradeReport(TypedDict):
    run_id: str  # the new run
    regraded_from: str
    tests: dict[str, str]  # task → the tests/ folder swapped in
    episodes: list[RegradedEpisode]
    reproduced: bool  # every grade as recorded
    differs: list[str]  # task#seed of the episodes whose grade differs


def parse_tests(specs: list[str] | None) -> dict[str, Path]:
    """``TASK=DIR`` pairs (``--tests``), each DIR a folder holding ``test.sh``."""
    out: dict[str, Path] = {}
    for spec in specs or []:
        task, sep, folder = spec.partition("=")
        if not sep or not task or not folder:
            raise ConfigError(f"--tests {spec!r}: give TASK=DIR, e.g. --tests hello-file=my-tests/")
        path = Path(folder).expanduser().resolve()
        if not (path / "test.sh").is_file():
            raise ConfigError(
                f"--tests {spec}: {path} holds no test.sh; give a tests/ folder of the task's shape"
            )
        out[task] = path
    return out


@dataclass
class _Plan:
    """How one episode's final state is rebuilt (decided before anything runs)."""

    episode: Episode
    task: Task
    snapshot: bytes | None  # the last full snapshot, when there is one


def _last_snapshot(store: BlobStore, episode: Episode) -> bytes | None:
    steps = episode.env_events
    digest = steps[-1].snapshot if steps else None
    return store.get_blob(digest) if digest else None


def _plan(store: BlobStore, run: RunDoc, episode: Episode, task: Task) -> _Plan:
    """The restoration plan, or one line saying why the episode's state cannot be rebuilt."""
    snapshot = _last_snapshot(store, episode)
    if snapshot is not None and not episode.meta.get("task", {}).get("step_actions"):
        return _Plan(episode, task, snapshot)
    kind = get_env_kind(env_kind(episode.key))
    why = None if kind.reexecutable else f"env kind {kind.kind!r} cannot re-execute recorded actions"
    why = why or forked_reason(episode)
    if why is not None and episode.env_events:
        raise ConfigError(
            f"regrade {run.run_id}: episode {episode.id[:12]} ({episode.key.task_id}#{episode.key.seed}) has no full "
            f"snapshot and {why}; record the run with env.snapshot: full to regrade it"
        )
    return _Plan(episode, task, None)


@contextmanager
def _swapped(task: Task, tests: Path | None) -> Iterator[Task]:
    """The task as recorded, or a copy of it whose tests/ is ``tests`` (removed after)."""
    if tests is None:
        yield task
        return
    tmp = Path(tempfile.mkdtemp(prefix="replaykit-regrade-"))
    try:
        copy = tmp / task.path.name
        shutil.copytree(task.path, copy, symlinks=True, ignore=shutil.ignore_patterns("tests"))
        copy_tree(tests, copy / "tests")  # in chunks, sparse files kept sparse (nothing grows with a size)
        yield load_task(copy)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _tests_digest(task: Task) -> str:
    files = sorted(p for p in task.tests_dir.rglob("*") if p.is_file())
    return digest_of({p.relative_to(task.tests_dir).as_posix(): file_sha256(p) for p in files})[:16]


def _rebuilt(plan: _Plan, task: Task, extras: Extras) -> tuple[Grade, str]:
    """The verifier's grade on the episode's rebuilt final state, and how it was rebuilt."""
    episode = plan.episode
    spec = recorded_spec(episode, task, extras)
    with episode_lock(episode.key):
        env = make_env(spec)
        steps = StepPlan(episode, task, env)
        try:
            env.start()
            how = "snapshot"
            if plan.snapshot is not None and isinstance(env, RestorableEnvironment):
                env.restore_snapshot(plan.snapshot)
            else:
                how = "re-execution"
                for event in episode.env_events:
                    steps.before_action()
                    env.run(event.action)
            recorded = episode.env_events[-1].state_digest if episode.env_events else None
            state = env.state_digest()
            if recorded is not None and state != recorded:
                detail = f"regrade: the rebuilt final state ({how}) is {state[:12]}, recorded {recorded[:12]}"
                return Grade(0.0, False, infra_failure=True, detail=detail), how
            return steps.grade(), how
        finally:
            env.close()


def _regraded(episode: Episode, grade: Grade, verifier: str, how: str) -> Episode:
    """The original events with the new grade, under a key of its own. No donor served them
    (they are the original's, which ``regraded_from`` names): a reuse claim is not carried."""
    extra = (*episode.key.extra, ("regraded_from", episode.id), ("verifier", verifier))
    key = dataclasses.replace(episode.key, extra=extra)
    scrubbed = dataclasses.replace(grade, detail=replay_scrubber(episode.meta).text(grade.detail))
    events = [e for e in episode.events if not isinstance(e, GradeEvent)] + [GradeEvent(scrubbed)]
    meta: EpisodeMeta = {
        **episode.meta,
        "regraded_from": episode.id,
        "regrade": {"verifier": verifier, "restored": how},
    }
    meta.pop("reused", None)
    if not is_legacy(episode.meta):  # its class under the new grade (an old one's stays derived)
        meta["outcome"] = classify(events).to_doc()
    return Episode(key, events, meta)


def regrade_run(
    store: RunStore,
    run_id: str,
    tests: Mapping[str, Path] | None = None,
    sources: TaskSources | None = None,
    progress: Progress | None = None,
) -> RegradeReport:
    """Re-grade every episode of a run offline into a new run (see the module doc). Each task is
    found by its id and content digest (``task_source.py``: the store's copy, then ``sources``)."""
    run = store.get_run(run_id)
    store.check_run(run)
    tasks = sorted({e.task_id for e in run.episodes})
    for name in tests or {}:
        if name not in tasks:
            raise ConfigError(
                f"--tests {name}=…: run {run.run_id} has no task {name!r} (its tasks: {', '.join(tasks)})"
            )
    episodes = [store.get_episode(c) for c in run.cassettes]
    sources = sources or TaskSources(store)
    try:
        found = {e.key.task_id: sources.find(e.key.task_id, e.key.task_digest) for e in episodes}
    except TaskError as exc:
        raise ConfigError(f"regrade {run.run_id}: {exc}") from None
    plans = [_plan(store, run, e, found[e.key.task_id]) for e in episodes]  # every episode checked first
    if progress:
        progress("plan", {"total": len(plans), "missing": len(plans)})
    regraded: list[tuple[Episode, str]] = []
    with network.serving(store, episodes) as served:
        for plan in plans:
            regraded.append(_regrade_one(plan, (tests or {}).get(plan.task.id), served[plan.episode.id]))
            if progress:
                progress(
                    "episode",
                    {"task_id": plan.task.id, "seed": plan.episode.key.seed, "grade": regraded[-1][0].grade},
                )
    for episode, _ in regraded:
        store.put_episode(episode)
    return _report(store, run, regraded, tests or {})


def _regrade_one(plan: _Plan, tests: Path | None, extras: Extras) -> tuple[Episode, str]:
    recorded = plan.episode.grade
    with _swapped(plan.task, tests) as task:
        verifier = _tests_digest(task)
        if recorded is None or recorded.infra_failure:  # never graded: nothing to grade again
            return _regraded(
                plan.episode, recorded or Grade(0.0, False, True, "no grade"), verifier, "not regraded"
            ), "not regraded (infra)"
        try:
            grade, how = _rebuilt(plan, task, extras)
        except (EnvError, ReplaykitError) as exc:
            grade, how = Grade(0.0, False, infra_failure=True, detail=f"regrade: {exc}"), "failed"
    return _regraded(plan.episode, grade, verifier, how), how


def _report(
    store: RunStore, run: RunDoc, regraded: list[tuple[Episode, str]], tests: Mapping[str, Path]
) -> RegradeReport:
    rows: list[RegradedEpisode] = []
    summaries: list[EpisodeSummary] = []
    bases: set[str] = set()
    originals = {e.cassette_id: e for e in run.episodes}
    for (new, how), original in zip(regraded, run.cassettes, strict=True):
        before, grade = originals[original], new.grade
        assert grade is not None
        same = (grade.reward, grade.passed, grade.infra_failure) == (
            before.reward or 0.0,
            before.passed,
            before.infra_failure,
        )
        rows.append(
            {
                "task_id": new.key.task_id,
                "seed": new.key.seed,
                "cassette_id": new.id,
                "regraded_from": original,
                "restored": how,
                "recorded_reward": before.reward or 0.0,
                "reward": grade.reward,
                "passed": grade.passed,
                "outcome": outcome_of(new),
                "same": same,
                "detail": grade.detail[:300],
            }
        )
        summary, basis = episode_summary(store, new.key)  # derived as a recorded run's rows are
        summaries.append(summary)
        bases |= {basis} if basis else set()
    ids = [s.cassette_id for s in summaries]
    new_id = digest_of({"regraded_from": run.run_id, "cassettes": ids})[:16]
    doc = run.replaced(
        run_id=new_id,
        cassettes=ids,
        episodes=summaries,
        reuse_basis=reuse_basis(bases),
        regraded_from=run.run_id,
    )
    store.put_run(doc)
    return {
        "run_id": new_id,
        "regraded_from": run.run_id,
        "tests": {t: str(p) for t, p in sorted(tests.items())},
        "episodes": rows,
        "reproduced": all(r["same"] for r in rows),
        "differs": [f"{r['task_id']}#{r['seed']}" for r in rows if not r["same"]],
    }


def regraded_original(store: RunStore, run: RunDoc) -> RunDoc:
    """The run ``run`` re-graded, its provenance derived: every cassette's key names the
    original run's cassette at the same place (``regraded_from``), never trusted from the
    run document alone."""
    if not run.regraded_from:
        raise ConfigError(f"run {run.run_id} is not a regraded run (make one with `replaykit regrade RUN`)")
    original = store.get_run(run.regraded_from)
    named = [dict(store.get_episode(c).key.extra).get("regraded_from") for c in run.cassettes]
    if named != original.cassettes:
        raise StoreCorrupt(
            f"run {run.run_id}: its cassettes are not the regrades of run {original.run_id}'s",
            "",
            str(store.location),
        )
    return original
