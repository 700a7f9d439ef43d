"""``replaykit runs``: the store's documents, each row with what its kind derives from what the
document names, verified (``list_runs``: the rows ``runs --json`` prints). A row that cannot be
read is listed as damaged, in one line; the others stand (``cassettes verify`` says more).

Loaded by a listing command: its imports stay lazy (issue 39 item 6: ``runs`` loads no pydantic
model of a run unless a run's rows need one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

from replaykit.core.errors import StoreError

if TYPE_CHECKING:
    from replaykit.cassette.backend import StoreBackend
    from replaykit.core.run_doc import RunDoc
    from replaykit.core.run_rows import RunRows
    from replaykit.train.stats import RunSummaryStats


class ListedRun(TypedDict):
    """One row of ``runs``: the stored row's columns, and what its kind derives."""

    id: str
    kind: str
    name: str
    harness_sha: str
    model: str
    created_at: str
    stats: NotRequired[RunSummaryStats]  # a measured run's replicate statistics
    model_calls: NotRequired[int]  # a run's, training's or fork's requests that reached the endpoint
    reused_events: NotRequired[int]  # the events its episodes were served from donors instead
    task_model_calls: NotRequired[int]  # a training's: its task model's ...
    proposer_calls: NotRequired[int]  # ... and its proposer's
    damaged: NotRequired[str]  # why the row could not be read (the listing stands)


def list_runs(store: StoreBackend, kind: str | None = None) -> list[ListedRun]:
    """Every document of the store (of ``kind`` only, when given), oldest first, each with what
    is derived from what it names."""
    rows: list[ListedRun] = [
        {
            "id": r["id"],
            "kind": r["kind"],
            "name": r["name"],
            "harness_sha": r["harness_sha"],
            "model": r["model"],
            "created_at": r["created_at"],
        }
        for r in store.list_runs()
        if kind is None or r["kind"] == kind
    ]
    for row in rows:
        try:
            _derived(store, row)
        except StoreError as exc:
            from replaykit.episodes.listing import damage_line  # loaded for a damaged row

            row["damaged"] = damage_line(exc)
    return rows


def _derived(store: StoreBackend, row: ListedRun) -> None:
    """What ``runs`` shows of a document beside its row, derived from what it names (verified)."""
    if row["kind"] == "measure":  # derived from the run's episodes (verified) and certificates
        from replaykit.train.stats import stored_run_stats

        run = _listed_run(store, row["id"])
        stats = stored_run_stats(store, run)
        row["stats"] = {
            "run_id": stats["run_id"],
            "units": stats["units"],
            "seeds": stats["seeds"],
            "pass_at_k": stats["pass_at_k"],
            "pass_hat_k": stats["pass_hat_k"],
            "seed_flip_rate": stats["seed_flip_rate"],
            "seed_pairs": stats["seed_pairs"],
            "reexec_flip_rate": stats["reexec_flip_rate"],
            "reexec_certified": stats["reexec_certified"],
            "reexec_forked": stats["reexec_forked"],
        }
        row["model_calls"], row["reused_events"] = run.model_calls, run.reused_events
    elif row["kind"] == "training":  # its runs' episodes and its proposals, each verified
        from replaykit.train.derived import verified_training  # a training is recomputed: loaded for one
        from replaykit.train.state import stored_paid

        paid = stored_paid(store, verified_training(store, row["id"], bundle=False))
        row["model_calls"], row["task_model_calls"] = paid["model_calls"], paid["task_model_calls"]
        row["proposer_calls"], row["reused_events"] = paid["proposer_calls"], paid["reused_events"]
    elif row["kind"] == "fork" and store.has(row["id"]):  # the fork's cassette: its live calls, checked
        counts = store.verified_reuse(row["id"])
        row["model_calls"] = store.verified_columns(row["id"])["n_llm"] - counts.calls
        row["reused_events"] = counts.events


def _listed_run(store: StoreBackend, run_id: str) -> RunRows | RunDoc:
    """A run's rows, its document verified, read without pydantic (``core/run_rows.py``); one
    that reader refuses is read with ``RunDoc``, which words what is wrong (or reads it)."""
    from replaykit.core.run_rows import read_run_rows

    try:
        return read_run_rows(store.get_doc(run_id, "measure"))
    except ValueError:
        return store.get_run(run_id)
