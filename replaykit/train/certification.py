"""Certification every epoch (``train.certify: every_epoch``): before an epoch is judged, its
baseline's episodes are re-executed in a fresh environment and each task certified
``deterministic`` or ``forked`` (``episodes.certify.certify_run``: the model served from the
cassette, the environment run for real).

A certificate is keyed by what it re-executed (the task's digest, the env kind, the image and
the digests of the task's episodes in the run), so it is reused only for those very episodes:
a baseline kept by a rejected epoch, or a resumed training, re-executes nothing again, and a
promoted baseline (other episodes) is certified anew. A replay (record mode ``none``)
re-executes nothing: it reads the certificates the training made, and one missing is one line.

The epoch's verdict names every certificate of its baseline's tasks (``certified``, covered by
its id) and leaves out the tasks they say are forked, as every verdict leaves out the forked
tasks it names (``exclusions.py``); verifying it derives both again from the certificates
(``exclusions.check_certified``), never from a recorded field.
"""

from __future__ import annotations

from pathlib import Path

from replaykit.cassette.backend import RunStore
from replaykit.core.errors import TrainError
from replaykit.core.progress import Progress, ProgressData, ProgressEvent
from replaykit.core.run_doc import RunDoc
from replaykit.episodes.certificate_lookup import get_certificate, task_certificates
from replaykit.train.exclusions import run_certificate_ids

EVERY_EPOCH = "every_epoch"


def certify_baseline(
    store: RunStore,
    run: RunDoc,
    *,
    replaying: bool,
    tasks: list[str],
    root: Path,
    progress: Progress,
    label: str,
) -> list[str]:
    """The sorted ids of the certificates of every task of the baseline ``run`` (re-executed
    where none is stored for its episodes; ``replaying``: read only)."""
    run_id = run.run_id
    if replaying:
        ids = run_certificate_ids(store, run)
        missing = sorted(t for t, c in ids.items() if get_certificate(store, c) is None)
        if missing:
            raise TrainError(
                f"{label}: baseline run {run_id} has no certificate of task(s) {', '.join(missing)}; a training"
                f" with train.certify: every_epoch replays from its certificates (`replaykit certify {run_id}`)"
            )
        return sorted(ids.values())
    from replaykit.episodes.certify import certify_run  # re-executes: loaded only to certify

    before = set(task_certificates(store, run))

    def bar(event: ProgressEvent, data: ProgressData) -> None:  # the inner bar: one step per task
        if event in ("plan", "task"):
            progress(event, {**data, "label": f"{label} certify"})

    report = certify_run(store, run_id, tasks=tasks, root=root, progress=bar)
    failed = [r for r in report["tasks"] if r["status"] == "error"]
    if failed:
        raise TrainError(
            f"{label}: certifying baseline run {run_id}: task {failed[0]['task_id']}: {failed[0]['reason']}"
            " (train.certify: every_epoch); fix it and run the training again: it resumes"
        )
    forked = [r["task_id"] for r in report["tasks"] if r["status"] == "forked"]
    fresh = sum(1 for r in report["tasks"] if r["task_id"] not in before)
    progress(
        "note",
        {
            "message": f"{label} {run.harness_sha[:10]}: certified {len(report['tasks'])} task(s)"
            f" ({fresh} re-executed, {len(report['tasks']) - fresh} by stored certificates):"
            f" {report['deterministic']} deterministic, {len(forked)} forked"
            + (f" ({', '.join(forked)}: left out of this epoch's verdict)" if forked else "")
        },
    )
    return sorted(run_certificate_ids(store, run).values())
