"""A verdict's exclusions: derived from ``forked`` certificates, never trusted from a document.

A task certified ``forked`` (its re-executed environment did not reproduce its recording) is
left out of a training verdict. When judging, :func:`forked` finds the certificates of the two
runs' tasks; the verdict document names them (``certificates``, sorted ids) and its id covers
them (``loss.verdict_id_of``), so the same id never means two exclusion sets. When a verdict is
verified, :func:`derive` recomputes its exclusions from the certificates it names, each checked
(in the store, ``forked``, and the certificate of that task's very episodes in one of the two
runs); a verdict recorded before verdicts named their certificates (no ``certificates`` field)
takes the certificates the store holds for its runs now. What the document says it excluded is
then compared with what was derived, like every other field: a forged exclusion is store
corruption.
"""

from __future__ import annotations

from replaykit.cassette.backend import StoreBackend
from replaykit.core.errors import StoreCorrupt
from replaykit.core.records import RunDocument

#: task id → (certificate id, reason)
Exclusions = dict[str, tuple[str, str]]


def forked(store: StoreBackend, *runs: RunDocument) -> Exclusions:
    """The forked certificates of the runs' tasks (what a verdict judged now excludes)."""
    from replaykit.episodes.certify import forked_certificates

    out: Exclusions = {}
    for run in runs:
        out.update(forked_certificates(store, run))
    return out


def reasons(exclusions: Exclusions) -> dict[str, str]:
    """Task id → reason: what a criterion is given to leave out."""
    return {task: reason for task, (_, reason) in sorted(exclusions.items())}


def certificate_ids(exclusions: Exclusions) -> list[str]:
    return sorted({cert for cert, _ in exclusions.values()})


def _corrupt(store: StoreBackend, what: str) -> StoreCorrupt:
    return StoreCorrupt(what, "", str(store.location))


def derive(
    store: StoreBackend, verdict_id: object, runs: tuple[RunDocument, RunDocument], named: object
) -> dict[str, str]:
    """The exclusions (task id → reason) of a stored verdict over ``runs`` (baseline, candidate),
    from the certificates it names (``named``: its ``certificates`` field; absent (None): the
    store's certificates of those runs now). ``store corrupt`` unless each is in the store,
    ``forked``, and the certificate of its task's episodes in one of the two runs."""
    from replaykit.episodes.certify import get_certificate, task_certificate_id

    if named is None:
        return reasons(forked(store, *runs))
    if not isinstance(named, list) or not all(isinstance(c, str) and c for c in named):
        raise _corrupt(store, f"verdict {verdict_id}: its certificates are not a list of ids")
    out: dict[str, str] = {}
    for cert_id in named:
        cert = get_certificate(store, cert_id)
        if cert is None:
            raise _corrupt(store, f"verdict {verdict_id}: its certificate {cert_id} is not in the store")
        task = str(cert.get("task_id") or "")
        if cert.get("status") != "forked":
            raise _corrupt(
                store,
                f"verdict {verdict_id}: its certificate {cert_id} says {cert.get('status')}, not forked",
            )
        if cert_id not in {task_certificate_id(store, run, task) for run in runs}:
            raise _corrupt(
                store,
                f"verdict {verdict_id}: certificate {cert_id} is not the certificate of task {task!r} in its runs",
            )
        out[task] = str(cert.get("reason") or "")
    return dict(sorted(out.items()))
