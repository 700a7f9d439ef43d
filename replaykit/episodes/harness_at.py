"""Which harness commit a measure runs, and its tree in the store: a ref resolved in the
config's harness repo (clean), or, replaying (record mode none), a commit SHA (or a unique
prefix) whose tree the store holds, so a bundle's receiver measures from the trees it imported
without the commits."""

from __future__ import annotations

from replaykit.cassette.backend import RunStore, StoreBackend
from replaykit.core.errors import CassetteNotFound
from replaykit.core.modes import RecordMode
from replaykit.episodes.config import RunConfig
from replaykit.episodes.harness import HarnessRepo


def stored_harness(store: RunStore, ref: str | None, record_mode: RecordMode) -> str | None:
    """Replaying (record mode none), a harness ref that is a commit SHA (or a unique prefix of
    one) whose tree the store holds: measured from the store, no repository needed (a bundle's
    receiver has the trees, not the commits)."""
    if record_mode != "none" or not ref or len(ref) < 7 or not all(c in "0123456789abcdef" for c in ref):
        return None
    try:
        return store.resolve_id("trees", ref, what="harness tree", column="sha")
    except CassetteNotFound:
        return None


def harness_sha(
    config: RunConfig,
    repo: HarnessRepo | None,
    store: StoreBackend,
    sha: str | None,
    harness_ref: str | None,
    persist: bool,
) -> str:
    """The harness commit measured (``harness_ref``'s in a clean repo unless ``sha`` is given),
    its tree leased and stored when the run persists."""
    if sha is None:
        assert repo is not None
        repo.ensure_clean()
        sha = repo.resolve(harness_ref)
        repo.check_entry(sha, config.harness.entry)
    if persist:
        store.lease("trees", [sha])  # leased before it is looked at: gc cannot take it now
        if not store.has_tree(sha):
            if repo is None:
                raise CassetteNotFound(f"harness tree {sha[:12]} is not in store {store.location}")
            store.put_tree(sha, repo.tree_files(sha))
    return sha
