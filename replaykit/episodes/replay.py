"""Replay runs offline: every episode of a run against a harness tree, digests compared.

``replay_run`` / ``replay_runs`` replay each distinct episode once (at the run's harness
SHA, or ``harness_ref``'s), inline or on an executor (``ReplayJob``, batched), check what
each run document says against the cassettes read, and report per run: identical or not,
each episode's recorded and replayed digests, the first divergence. What an episode says
it was served from a donor (prefix reuse, a fork's parent) is checked against the donor's
events (``cassette/lineage.py``): a false claim is store corruption, a donor not in the store
leaves it unchecked (listed). Nothing here touches the network or writes a run; measuring
is ``run.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from replaykit.cassette.backend import EpisodeStore, RunStore
from replaykit.cassette.events import Episode
from replaykit.cassette.lineage import ClaimStatus, check_claim
from replaykit.core.errors import CassetteNotFound, ConfigError, HarnessError
from replaykit.core.meta import EpisodeMeta
from replaykit.core.progress import Progress
from replaykit.core.run_doc import ModelRef, RunDoc
from replaykit.episodes.agents import require_program, version_note
from replaykit.episodes.harness import HarnessRepo
from replaykit.episodes.rollout import ReplayResult, replay_episode
from replaykit.episodes.run_records import ReplayReport
from replaykit.execution.settings import Executor


@dataclass
class ReplayJob:
    """One episode to replay offline against a harness tree (picklable, portable)."""

    episode: Episode
    tree_dir: str

    portable_paths: ClassVar[tuple[str, ...]] = ("tree_dir",)


def replay_job(job: ReplayJob) -> ReplayResult:
    return replay_episode(job.episode, Path(job.tree_dir))


def replay_run(
    store: RunStore,
    run_id: str,
    harness_ref: str | None = None,
    repo_path: str | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> ReplayReport:
    """Replay every episode of a run offline; compare digests."""
    return replay_runs(store, [run_id], harness_ref, repo_path, progress, executor)[0]


def replay_runs(
    store: RunStore,
    run_ids: list[str],
    harness_ref: str | None = None,
    repo_path: str | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
    claims: dict[str, ClaimStatus] | None = None,
) -> list[ReplayReport]:
    """Replay the episodes of several runs (each distinct episode once) on ``executor``
    (default: inline, one at a time); one report per run, in order. Each episode's reuse
    claim is checked against its donor (into ``claims`` when given: cassette id -> status)."""
    runs = [store.get_run(run_id) for run_id in run_ids]
    replayed: list[str] = []  # the harness sha each run is replayed at
    trees: dict[str, Path] = {}
    plan: list[tuple[str, str]] = []  # (cassette id, harness sha), each once
    for run in runs:
        sha, files = _replay_tree(store, run.harness_sha, harness_ref, repo_path)
        replayed.append(sha)
        if sha not in trees:
            trees[sha] = store.materialise_tree(sha, files)  # never written into a read-only store
        plan.extend((cid, sha) for cid in run.cassettes)
    claims = {} if claims is None else claims  # cassette id -> its reuse claim, checked
    metas: dict[str, EpisodeMeta] = {}  # cassette id -> its meta (the named agent's version)
    results = _replay_plan(store, list(dict.fromkeys(plan)), trees, progress, executor, claims, metas)
    for run in runs:  # what the run says of each episode, against the (verified) cassette read above
        store.check_run(run)
        for name in run.trees:  # the task folders it names (a bundle's copy): verified, never served
            store.get_tree(name)
    reports = []
    for run, sha in zip(runs, replayed, strict=True):
        report = _replay_report(run, sha, [results[(cid, sha)] for cid in run.cassettes], claims)
        if note := version_note((metas[cid] for cid in run.cassettes), "replayed"):
            report["agent_note"] = note
        reports.append(report)
    return reports


def _replay_plan(
    store: EpisodeStore,
    plan: list[tuple[str, str]],
    trees: dict[str, Path],
    progress: Progress | None,
    executor: Executor | None,
    claims: dict[str, ClaimStatus],
    metas: dict[str, EpisodeMeta],
) -> dict[tuple[str, str], ReplayResult]:
    """Each (cassette, harness sha) of ``plan`` replayed, inline or on ``executor``, each
    cassette's reuse claim checked into ``claims``; the results."""
    results: dict[tuple[str, str], ReplayResult] = {}
    programs: set[str] = set()  # the named agents whose program is installed here

    def done(item: tuple[str, str], outcome: ReplayResult) -> None:
        results[item] = outcome
        if progress:
            progress(
                "episode", {"task_id": outcome.task_id, "seed": outcome.seed, "identical": outcome.identical}
            )

    def read(cid: str) -> Episode:
        episode = store.get_episode(cid)
        require_program(episode.meta, programs)
        metas[cid] = episode.meta
        if cid not in claims:
            claims[cid] = check_claim(store, episode)
        return episode

    if executor is None or getattr(executor, "workers", 0) == 1:
        for cid, sha in plan:  # inline: one episode in memory at a time
            done((cid, sha), replay_episode(read(cid), trees[sha]))
    else:
        jobs = [ReplayJob(read(cid), str(trees[sha])) for cid, sha in plan]
        for job, outcome in executor.map(replay_job, jobs, batch=True):
            done((job.episode.id, _sha_of(job.tree_dir, trees)), outcome)
    return results


def _replay_tree(
    store: EpisodeStore, sha: str, harness_ref: str | None, repo_path: str | None
) -> tuple[str, dict[str, tuple[int, bytes]] | None]:
    """The harness sha a run is replayed at (its own, or ``harness_ref`` in ``repo_path``) and
    that tree's files when the store lacks them."""
    if not harness_ref:
        return sha, None
    if repo_path is None:  # never the run's recorded path: it may be another machine's, or checkout's
        raise ConfigError(
            f"--harness {harness_ref} needs the harness repository to find it in: add --config CFG "
            "(its harness.repo) or --harness-repo PATH"
        )
    repo = HarnessRepo(Path(repo_path))
    sha = repo.resolve(harness_ref)
    return sha, None if store.has_tree(sha) else repo.tree_files(sha)


def replay_cassette(
    store: RunStore, cassette_id: str, harness_ref: str | None = None, repo_path: str | None = None
) -> ReplayReport:
    """Replay one cassette (an episode of a run, a fork) offline at its harness SHA (or
    ``harness_ref``'s in ``repo_path``); its reuse claim checked against its donor."""
    cid = store.resolve_id("cassettes", cassette_id, what="cassette")
    episode = store.get_episode(cid)
    sha, files = episode.key.harness_sha, None
    if harness_ref:
        if not repo_path:
            raise HarnessError(
                f"--harness with a cassette needs --harness-repo (the repo {harness_ref!r} is in)"
            )
        repo = HarnessRepo(Path(repo_path))
        sha = repo.resolve(harness_ref)
        files = None if store.has_tree(sha) else repo.tree_files(sha)
    elif not store.has_tree(sha):
        raise CassetteNotFound(
            f"the harness tree {sha[:12]} of cassette {cid} is not in store {store.location}"
        )
    claims: dict[str, ClaimStatus] = {cid: check_claim(store, episode)}
    require_program(episode.meta, set())
    result = replay_episode(episode, store.materialise_tree(sha, files))
    note = version_note([episode.meta], "replayed")
    run = RunDoc(
        run_id=cid,
        harness_sha=episode.key.harness_sha,
        model=ModelRef(name=episode.key.model.name, endpoint=""),
        config_digest="",
        cassettes=[cid],
    )
    report: ReplayReport = {**_replay_report(run, sha, [result], claims), "of": "cassette"}
    if note:
        report["agent_note"] = note
    return report


def _sha_of(tree_dir: str, trees: dict[str, Path]) -> str:
    return next(sha for sha, path in trees.items() if str(path) == tree_dir)


def _replay_report(
    run: RunDoc, sha: str, results: list[ReplayResult], claims: dict[str, ClaimStatus]
) -> ReplayReport:
    divergences = [r.divergence for r in results if r.divergence]
    report: ReplayReport = {
        "run_id": run.run_id,
        "harness_sha": run.harness_sha,
        "replayed_harness_sha": sha,
        "identical": all(r.identical for r in results),
        "episodes": [
            {
                "cassette_id": r.cassette_id,
                "task_id": r.task_id,
                "seed": r.seed,
                "identical": r.identical,
                "recorded_digest": r.recorded_digest,
                "replayed_digest": r.replayed_digest,
            }
            for r in results
        ],
        "divergence": divergences[0] if divergences else None,
        "divergences": len(divergences),
    }
    mine = [claims.get(cid, "none") for cid in run.cassettes]
    if any(status != "none" for status in mine):
        report["claims_checked"] = mine.count("checked")
        report["claims_unchecked"] = [
            c for c, s in zip(run.cassettes, mine, strict=True) if s == "donor absent"
        ]
    return report
