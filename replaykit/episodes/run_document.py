"""A run's document, derived from its cassettes (never from what measuring remembers).

``run_document`` builds it from each cassette's verified columns and what its reuse claim
counts (``cassette/lineage.py``): the episodes' outcomes, their model calls paid and events
served from donors, and the run's ``reuse_basis`` when any were. ``put_run_once`` writes it
unless the store holds exactly this one, so ``created_at`` stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from replaykit.cassette.backend import DocumentStore, EpisodeStore, StoreBackend
from replaykit.cassette.keys import CassetteKey
from replaykit.cassette.lineage import EXACT, SHARED_SAMPLE
from replaykit.core.determinism import digest_of
from replaykit.core.run_doc import EpisodeSummary, ModelRef, Panel, RunDoc
from replaykit.core.tree_digest import task_tree_name
from replaykit.envs.tasks import Task, task_files
from replaykit.episodes.config import RunConfig
from replaykit.models.config import ModelConfig
from replaykit.models.endpoint import model_id


def put_run_once(store: DocumentStore, run: RunDoc) -> None:
    """Write a run document unless the store already holds exactly this one (``created_at`` stays)."""
    if store.has_doc(run.run_id, digest_of(run.to_json())):
        return
    store.put_run(run)


def episode_summary(store: EpisodeStore, key: CassetteKey) -> tuple[EpisodeSummary, str | None]:
    """One episode's row of a run, from its cassette's verified columns and reuse claim (and
    the claim's basis, when it was served a donor's events)."""
    row = store.verified_columns(key.id)  # cached columns checked against the events
    reuse = store.verified_reuse(key.id)  # what its claim counts (the claim checked against its events)
    summary = EpisodeSummary(
        task_id=key.task_id,
        seed=key.seed,
        cassette_id=key.id,
        reward=row["reward"],
        passed=bool(row["passed"]),
        infra_failure=bool(row["infra_failure"]),
        steps=row["n_env"],
        llm_calls=row["n_llm"],
        tokens=row["tokens"],
        digest=row["digest"],
        reused_events=reuse.events,
        model_calls=row["n_llm"] - reuse.calls if reuse.events else None,
    )
    return summary, reuse.basis if reuse.events else None


def run_document(
    config: RunConfig,
    store: EpisodeStore,
    sha: str,
    model: ModelConfig,
    keys: Sequence[tuple[CassetteKey, Task | None]],
    repo_path: str,
    trees: Sequence[str] = (),
) -> RunDoc:
    """The run of ``sha`` on these episodes; its model as its keys name it (a key's format
    decides how: the run ids of a format-1 training derive again as they were recorded)."""
    mid = keys[0][0].model if keys else model_id(model)
    episodes = []
    bases = set()
    for key, _ in keys:
        summary, basis = episode_summary(store, key)
        episodes.append(summary)
        if basis:
            bases.add(basis)
    ids = [k.id for k, _ in keys]
    return RunDoc(
        run_id=digest_of({"sha": sha, "model": asdict(mid), "config": config.digest(), "cassettes": ids})[
            :16
        ],
        name=config.name,
        harness_sha=sha,
        harness_repo=repo_path,
        model=ModelRef.of(mid),
        config_digest=config.digest(),
        panel=Panel(tasks=sorted({k.task_id for k, _ in keys}), seeds=list(config.panel.seed_list)),
        cassettes=ids,
        episodes=episodes,
        reuse_basis=reuse_basis(bases),
        trees=list(trees),
    )


def task_trees(store: StoreBackend, tasks: Sequence[Task]) -> list[str]:
    """Each task folder of a panel kept in the store as a tree named by its id and content digest
    (``core.tree_digest``; leased until the run document names it), so a bundle of the run carries
    the tasks it ran and any machine finds them by content; the names kept (a folder holding a
    symbolic link is not)."""
    names = []
    for task in tasks:
        name = task_tree_name(task.id, task.digest)
        store.lease("trees", [name])  # before it is looked at: gc cannot take it now
        if not store.has_tree(name):
            files = task_files(task)
            if files is None:
                continue
            store.put_tree(name, files)
        names.append(name)
    return names


def reuse_basis(bases: set[str]) -> str:
    """A run's reuse basis from its episodes' claims' (the weaker one, when they differ)."""
    return SHARED_SAMPLE if SHARED_SAMPLE in bases else EXACT if bases else ""
