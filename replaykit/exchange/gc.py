"""Removing things from a store: ``cassettes rm`` and ``gc``.

Documents (runs, trainings, verdicts) and cassettes are removed only when named (or,
with ``recursive``, when everything that references them is removed too); blobs and
harness trees go once no kept row reaches them. Nothing that a kept document
references, and nothing a running writer holds a lease on (``Store.leasing``), is ever
removed. The plan is computed and executed inside one SQLite
transaction, so a concurrent writer never sees half a removal and a crash leaves the
store as it was. References are followed exactly as bundle export follows them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from replaykit.cassette.backend import StoreBackend
from replaykit.core.errors import StoreError
from replaykit.exchange.bundle import resolve_root
from replaykit.exchange.refs import doc_refs, episode_blobs, tree_blobs


class RemovedDocument(TypedDict):
    id: str
    kind: str  # measure, training, verdict, ...; empty when the row has none


class RemovalReport(TypedDict):
    """What ``cassettes rm``/``gc`` removed (or, ``dry_run``, would remove); ``--json``."""

    dry_run: bool
    runs: list[RemovedDocument]
    cassettes: list[str]
    trees: list[str]
    blobs: int
    bytes: int
    compacted: NotRequired[bool]  # after a removal: whether the index was given back to the disk
    index_bytes: NotRequired[int]
    note: NotRequired[str]


@dataclass
class Plan:
    runs: list[str] = field(default_factory=list)  # runs-table documents: runs, trainings, verdicts
    cassettes: list[str] = field(default_factory=list)
    trees: list[str] = field(default_factory=list)
    blobs: list[str] = field(default_factory=list)
    bytes: int = 0
    kinds: dict[str, str] = field(default_factory=dict)

    def to_json(self, dry_run: bool) -> RemovalReport:
        return {
            "dry_run": dry_run,
            "runs": [{"id": r, "kind": self.kinds.get(r, "")} for r in self.runs],
            "cassettes": self.cassettes,
            "trees": self.trees,
            "blobs": len(self.blobs),
            "bytes": self.bytes,
        }


class _Graph:
    """Who references whom, from the store's rows and documents."""

    def __init__(self, store: StoreBackend) -> None:
        self.store = store
        self.kinds = dict(store.index_rows("runs", "id, kind"))
        self.doc_refs: dict[str, dict[str, list[str]]] = {}
        for (doc_id,) in store.index_rows("runs", "id"):
            row, data = store.doc_version(doc_id)  # row and blob of one version (a training saves each epoch)
            refs = doc_refs(json.loads(data), f"run {doc_id}")
            refs["blobs"] = [row["doc"], *refs["blobs"]]
            self.doc_refs[doc_id] = refs
        self.cassettes = {
            i: (doc, sha) for i, doc, sha in store.index_rows("cassettes", "id, doc, harness_sha")
        }
        self.trees = dict(store.index_rows("trees", "sha, manifest"))

    def referrers(self, table: str, key: str, kept: set[str]) -> list[str]:
        return [d for d in kept if key in self.doc_refs[d][table]]

    def live_blobs_and_trees(
        self, runs: set[str], cassettes: set[str], leased_trees: Iterable[str] = ()
    ) -> tuple[set[str], set[str]]:
        blobs: set[str] = set()
        trees: set[str] = set(leased_trees)
        for d in runs:
            blobs.update(self.doc_refs[d]["blobs"])
            trees.update(self.doc_refs[d]["trees"])
        for c in cassettes:
            doc_hash, sha = self.cassettes[c]
            refs, _ = episode_blobs(
                json.loads(self.store.get_blob(doc_hash)), self.store.get_blob, f"cassette {c}"
            )
            blobs.update(refs | {doc_hash})
            if sha:
                trees.add(sha)
        trees &= set(self.trees)
        for sha in trees:
            blobs.update(tree_blobs(self.trees[sha], f"tree {sha}"))
        return blobs, trees


def plan(store: StoreBackend, ids: list[str], recursive: bool = False, prune: bool = False) -> Plan:
    """What removing ``ids`` (and, with no ids, only garbage) would delete. What a live
    writer holds a lease on (a running ``run`` or ``train``) is kept, and naming it is refused."""
    graph = _Graph(store)
    leased = store.leased(prune=prune)
    named = _named(store, graph, ids, leased)
    doomed_runs = {i for i, t in named.items() if t == "runs"}
    doomed_cassettes = {i for i, t in named.items() if t == "cassettes"}
    if recursive:  # everything the named documents reach, then keep what a kept document still needs
        _reach(graph, doomed_runs, doomed_cassettes)
        doomed_runs -= set(leased["runs"])
        doomed_cassettes -= set(leased["cassettes"])
    _spare_what_is_used(graph, named, doomed_runs, doomed_cassettes)
    live_blobs, live_trees = graph.live_blobs_and_trees(
        set(graph.doc_refs) - doomed_runs, set(graph.cassettes) - doomed_cassettes, leased["trees"]
    )
    live_blobs.update(leased["blobs"])
    sizes = dict(store.index_rows("blobs", "hash, size"))
    dead_blobs = sorted(set(sizes) - live_blobs)
    return Plan(
        runs=sorted(doomed_runs),
        cassettes=sorted(doomed_cassettes),
        trees=sorted(set(graph.trees) - live_trees),
        blobs=dead_blobs,
        bytes=sum(int(sizes[b] or 0) for b in dead_blobs),
        kinds=graph.kinds,
    )


def _named(
    store: StoreBackend, graph: _Graph, ids: list[str], leased: dict[str, dict[str, str]]
) -> dict[str, str]:
    """The full id of each id given -> its table; one a live writer leases is refused."""
    named: dict[str, str] = {}
    for given in ids:
        table, full = resolve_root(store, given)
        named[full] = table
        holder = leased[table].get(full)
        if holder:
            what = graph.kinds.get(full, "document") if table == "runs" else "cassette"
            raise StoreError(
                f"{what} {full} is in use by a running replaykit process ({holder}); wait for it to finish, then retry"
            )
    return named


def _reach(graph: _Graph, doomed_runs: set[str], doomed_cassettes: set[str]) -> None:
    """Add to the doomed documents and cassettes everything the doomed documents name."""
    pending = list(doomed_runs)
    while pending:
        refs = graph.doc_refs[pending.pop()]
        for r in refs["runs"]:
            if r in graph.doc_refs and r not in doomed_runs:
                doomed_runs.add(r)
                pending.append(r)
        doomed_cassettes.update(c for c in refs["cassettes"] if c in graph.cassettes)


def _spare_what_is_used(
    graph: _Graph, named: dict[str, str], doomed_runs: set[str], doomed_cassettes: set[str]
) -> None:
    """Take back what a kept document still names, until nothing changes; a named one still
    named by a kept document is refused, naming who uses it."""
    changed = True
    while changed:
        changed = False
        kept = set(graph.doc_refs) - doomed_runs
        for table, doomed in (("runs", doomed_runs), ("cassettes", doomed_cassettes)):
            for key in sorted(doomed):
                users = graph.referrers(table, key, kept)
                if not users:
                    continue
                if key in named:
                    what = graph.kinds.get(key, "cassette") if table == "runs" else "cassette"
                    users_text = ", ".join(f"{graph.kinds[u]} {u}" for u in sorted(users)[:3]) + (
                        f" and {len(users) - 3} more" if len(users) > 3 else ""
                    )
                    raise StoreError(
                        f"{what} {key} is referenced by {users_text}; remove that first (or name it too, or pass --recursive from it)"
                    )
                doomed.discard(key)
                changed = True


def remove(
    store: StoreBackend, ids: list[str], recursive: bool = False, dry_run: bool = False
) -> RemovalReport:
    """Remove ``ids`` (none: only unreferenced blobs and trees) in one transaction."""
    if not store.exists():
        raise StoreError(f"no store at {store.location}")
    if dry_run:
        return plan(store, ids, recursive).to_json(dry_run=True)
    with store.room_to_remove(), store.write_lock():  # plan and delete under one write transaction
        found = plan(store, ids, recursive, prune=True)
        store.delete_rows("runs", found.runs)
        store.delete_rows("cassettes", found.cassettes)
        store.delete_rows("trees", found.trees)
        store.delete_rows("blobs", found.blobs)
    report = found.to_json(dry_run=False)
    if found.blobs or found.runs or found.cassettes:  # deleted first; compacted only with room
        compacted = store.compact()
        report["compacted"] = compacted.get("compacted") is True
        size, note = compacted.get("index_bytes"), compacted.get("note")
        if isinstance(size, int):
            report["index_bytes"] = size
        if isinstance(note, str):
            report["note"] = note
    return report
