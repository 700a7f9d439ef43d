"""A verdict's exclusions: derived from ``forked`` certificates, never trusted from a document.

A task certified ``forked`` (its re-executed environment did not reproduce its recording) is
left out of a training verdict. When judging, :func:`forked` finds the certificates of the two
runs' tasks (:func:`epoch_exclusions`: those a training's epoch judges by); the verdict
document names them (``certificates``, sorted ids) and its id covers them
(``loss.verdict_id_of``), so the same id never means two exclusion sets. When a verdict is
verified, :func:`derive` recomputes its exclusions from the certificates it names, each checked
(in the store, ``forked``, and the certificate of that task's very episodes in one of the two
runs); a verdict recorded before verdicts named their certificates (no ``certificates`` field)
takes the certificates the store holds for its runs now. What the document says it excluded is
then compared with what was derived, like every other field: a forged exclusion is store
corruption.

A verdict of a training that certifies every epoch (``train.certify: every_epoch``,
``certification.py``) also names every certificate of its baseline's tasks (``certified``):
:func:`check_certified` derives that list again from the baseline run and requires each to be
stored, and each forked one to be among the exclusions.
"""

from __future__ import annotations

from replaykit.cassette.backend import EpisodeStore, RunStore, StoreHandle
from replaykit.core.errors import StoreCorrupt
from replaykit.core.run_doc import RunDoc
from replaykit.core.training_doc import EpochRecord
from replaykit.core.verdict_doc import VerdictDoc
from replaykit.episodes.certificate_lookup import forked_certificates, get_certificate, task_certificate_id

#: task id → (certificate id, reason)
Exclusions = dict[str, tuple[str, str]]


def forked(store: RunStore, *runs: RunDoc) -> Exclusions:
    """The forked certificates of the runs' tasks (what a verdict judged now excludes)."""
    out: Exclusions = {}
    for run in runs:
        out.update(forked_certificates(store, run))
    return out


def reasons(exclusions: Exclusions) -> dict[str, str]:
    """Task id → reason: what a criterion is given to leave out."""
    return {task: reason for task, (_, reason) in sorted(exclusions.items())}


def certificate_ids(exclusions: Exclusions) -> list[str]:
    return sorted({cert for cert, _ in exclusions.values()})


def _corrupt(store: StoreHandle, what: str) -> StoreCorrupt:
    return StoreCorrupt(what, "", str(store.location))


def derive(store: RunStore, verdict_id: object, runs: tuple[RunDoc, RunDoc], named: object) -> dict[str, str]:
    """The exclusions (task id → reason) of a stored verdict over ``runs`` (baseline, candidate),
    from the certificates it names (``named``: its ``certificates`` field; absent (None): the
    store's certificates of those runs now). ``store corrupt`` unless each is in the store,
    ``forked``, and the certificate of its task's episodes in one of the two runs."""
    if named is None:
        return reasons(forked(store, *runs))
    return reasons(named_exclusions(store, verdict_id, runs, named))


def named_exclusions(
    store: RunStore, verdict_id: object, runs: tuple[RunDoc, RunDoc], named: object
) -> Exclusions:
    """The exclusions of the certificates a verdict over ``runs`` names, each checked as
    :func:`derive` says (what a resumed or replayed epoch judges its very runs with again:
    certificates made since, a candidate certified as a later baseline, never change it)."""
    if not isinstance(named, list) or not all(isinstance(c, str) and c for c in named):
        raise _corrupt(store, f"verdict {verdict_id}: its certificates are not a list of ids")
    out: Exclusions = {}
    for cert_id in named:
        cert = get_certificate(store, cert_id)
        if cert is None:
            raise _corrupt(store, f"verdict {verdict_id}: its certificate {cert_id} is not in the store")
        task = cert.task_id
        if cert.status != "forked":
            raise _corrupt(
                store,
                f"verdict {verdict_id}: its certificate {cert_id} says {cert.status}, not forked",
            )
        if cert_id not in {task_certificate_id(store, run, task) for run in runs}:
            raise _corrupt(
                store,
                f"verdict {verdict_id}: certificate {cert_id} is not the certificate of task {task!r} in its runs",
            )
        out[task] = (cert_id, cert.reason)
    return dict(sorted(out.items()))


def epoch_exclusions(
    store: RunStore,
    recorded: EpochRecord | None,
    baseline: RunDoc,
    candidate: RunDoc,
    certified: list[str] | None,
) -> Exclusions:
    """The forked certificates an epoch's verdict leaves tasks out by: certifying every epoch,
    its baseline's (made this epoch); else those the store holds for both runs, except that a
    recorded epoch (``recorded``) judging the very same runs again (resumed, replayed) takes the
    ones its verdict names, checked: certificates made since never change a recorded verdict."""
    if certified is not None:
        return forked(store, baseline)
    runs = (baseline.run_id, candidate.run_id)
    if recorded and recorded.verdict_id and (recorded.baseline_run, recorded.candidate_run) == runs:
        doc = VerdictDoc.read(store.get_doc(str(recorded.verdict_id), kind="verdict"))
        if doc.certificates is not None:  # absent: recorded before verdicts named them
            return named_exclusions(store, doc.verdict_id, (baseline, candidate), doc.certificates)
    return forked(store, baseline, candidate)


def run_certificate_ids(store: EpisodeStore, run: RunDoc) -> dict[str, str]:
    """Task id → the id the certificate of this run's episodes of that task has (stored or not)."""
    out = {t: task_certificate_id(store, run, t) for t in sorted({e.task_id for e in run.episodes})}
    return {t: c for t, c in out.items() if c is not None}


def check_certified(
    store: RunStore, verdict_id: object, baseline: RunDoc, named: object, excluded: object
) -> None:
    """``store corrupt`` unless ``named`` (a verdict's ``certified``) is exactly the certificates
    of its baseline's tasks, each stored, and ``excluded`` (its ``certificates``) exactly the
    forked ones among them."""
    derived = sorted(run_certificate_ids(store, baseline).values())
    if named != derived:
        raise _corrupt(
            store,
            f"verdict {verdict_id}: its certified list is not the certificates of baseline run {baseline.run_id}'s tasks",
        )
    forked = []
    for cert_id in derived:
        cert = get_certificate(store, cert_id)
        if cert is None:
            raise _corrupt(
                store, f"verdict {verdict_id}: its baseline's certificate {cert_id} is not in the store"
            )
        if cert.status == "forked":
            forked.append(cert_id)
    if sorted(excluded if isinstance(excluded, list) else []) != forked:
        raise _corrupt(
            store,
            f"verdict {verdict_id}: the tasks it excludes are not those its baseline's certificates say forked",
        )
