"""Derived training documents are recomputed, never trusted.

A verdict is a function of its two runs and its criterion; a training's verdicts,
decisions, chain and final baseline are a function of its epochs' runs, its criterion
and its optimizer; its initial baseline is a git bundle. :func:`verify_verdict` and
:func:`verify_training` recompute them from the store (runs from their cassettes'
events, verdicts with the recorded criterion, decisions with the recorded optimizer,
walking the epochs as the counterfactual audit does, :mod:`~replaykit.train.walk`; a verdict's exclusions
from the certificates it names, :mod:`~replaykit.train.exclusions`) and raise ``store
corrupt: …`` on the first disagreement. Every command that shows or uses one reads it
through :func:`verified_verdict` / :func:`verified_training`: bundle import and verify,
``cassettes verify``, ``replay`` of a training, ``audit``, ``cassettes diff VERDICT``, the
report and the viewer.

A verdict and a training are read into their models (``VerdictDoc``, ``TrainingDoc``, by the
store: one of another shape is corruption); what they derive is then recomputed here.
"""

from __future__ import annotations

import shutil

from replaykit.cassette.backend import BlobStore, DocumentStore, RunStore, StoreHandle
from replaykit.core.errors import ConfigError, ReplaykitError, StoreCorrupt, StoreError
from replaykit.core.stale import owned_temp_dir
from replaykit.core.training_doc import EpochRecord, TrainingDoc
from replaykit.core.verdict_doc import VerdictDoc, VerdictRecord
from replaykit.train import exclusions, gitops
from replaykit.train.certification import EVERY_EPOCH
from replaykit.train.criteria import make_criterion
from replaykit.train.loss import verdict_id_of
from replaykit.train.panels import TRAIN, VAL
from replaykit.train.scratch import Proposal
from replaykit.train.transfer_doc import verified_transfer
from replaykit.train.walk import Measurements, chosen, training_config, walk


def _corrupt(store: StoreHandle, what: str) -> StoreCorrupt:
    return StoreCorrupt(what, "", str(store.location))


def recompute_verdict(store: RunStore, doc: VerdictDoc) -> VerdictRecord:
    """The verdict ``doc``'s runs give under its recorded criterion (runs checked against their cassettes)."""
    recorded = doc.verdict
    vid = doc.verdict_id
    ids = {"baseline": doc.baseline_run, "candidate": doc.candidate_run}
    for role, run_id in ids.items():
        if not isinstance(run_id, str) or not run_id:
            raise _corrupt(
                store, f"verdict {vid}: it names no {role} run (a verdict compares two measured runs)"
            )
    baseline, candidate = store.get_run(str(ids["baseline"])), store.get_run(str(ids["candidate"]))
    for role, run in (("baseline", baseline), ("candidate", candidate)):
        if run.harness_sha != (doc.baseline_sha if role == "baseline" else doc.candidate_sha):
            raise _corrupt(
                store, f"verdict {vid}: its {role}_sha is not the harness of its {role} run {run.run_id}"
            )
        store.check_run(run)
    params = dict(recorded.get("params") or {})
    named = doc.certificates  # absent: recorded before verdicts named their certificates
    excluded = exclusions.derive(store, vid, (baseline, candidate), named)
    certs = sorted(named) if isinstance(named, list) else None
    certified = doc.certified  # present: its training certified the baseline every epoch
    if certified is not None:
        exclusions.check_certified(store, vid, baseline, certified, named)
    if vid != verdict_id_of(
        doc.baseline_run, doc.candidate_run, recorded["criterion"], params, certs, certified
    ):
        raise _corrupt(
            store, f"verdict {vid}: its runs, criterion, params or certificates are not the ones its id names"
        )
    try:
        criterion = make_criterion(recorded["criterion"], **params)
    except (ConfigError, TypeError) as exc:
        raise StoreError(f"verdict {vid}: cannot recompute it: {exc}") from None
    return criterion(candidate, baseline, excluded).to_dict()


def verify_verdict(store: RunStore, doc: VerdictDoc) -> None:
    """``store corrupt`` unless the recorded verdict is exactly what its runs and criterion give."""
    own, recorded = recompute_verdict(store, doc), doc.verdict
    if own != recorded:
        fields = sorted(k for k in set(own) | set(recorded) if own.get(k) != recorded.get(k))
        raise _corrupt(
            store,
            f"verdict {doc.verdict_id}: field(s) {', '.join(fields)} do not follow from its runs"
            f" under {recorded.get('criterion')} (forged or corrupt)",
        )


def verify_git_bundle(store: BlobStore, doc: TrainingDoc) -> None:
    """The training's initial-baseline blob is a git bundle (``git bundle verify``) holding its initial SHA."""
    tid = doc.training_id
    tmp = owned_temp_dir("bundle-check")
    try:
        gitops.clone_bundle(
            store.get_blob(doc.initial_bundle or ""),
            tmp / "harness",
            doc.initial_sha,
            doc.branch or "main",
            where=f"training {tid}",
        )
    except StoreCorrupt as exc:
        raise exc.within(f"training {tid}", str(store.location)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _NoReapply:
    """Stands in for the scratch clone: replaying the recorded policy never re-applies a diff."""

    def apply(self, parent: str, proposal: Proposal) -> tuple[str | None, str | None]:
        return None, f"the recorded decisions led to baseline {parent[:10]}, which no epoch recorded"


def verify_training(store: RunStore, doc: TrainingDoc, bundle: bool = True) -> None:
    """``store corrupt`` unless the training's verdicts, decisions, candidate SHAs, chain and
    final baseline are what its runs, criterion and optimizer give (and, with ``bundle``,
    its git bundle verifies)."""
    tid = doc.training_id
    epochs = doc.epochs
    certifies = _certifies(doc)
    verdict_ids = [_verify_epoch_verdict(store, tid, e, certifies) for e in epochs]
    for e in epochs:
        _verify_panels(store, tid, e)
    if doc.verdicts != [v for v in verdict_ids if v]:
        raise _corrupt(store, f"training {tid}: its verdicts list is not its epochs' verdicts")
    decided = [e for e in epochs if e.skipped or e.promoted is not None]
    if decided != epochs[: len(decided)] or len(epochs) - len(decided) > 1:  # only the last may await step()
        raise _corrupt(store, f"training {tid}: an epoch before its last has no recorded step")
    head = _recomputed_head(store, doc, decided) if decided and doc.runs else doc.initial_sha
    chain = [doc.initial_sha] + [e.candidate_sha for e in decided if e.promoted and e.candidate_sha]
    if doc.chain != chain:
        raise _corrupt(store, f"training {tid}: its chain is not its accepted candidates in order")
    if doc.final_baseline != head or chain[-1] != head:
        raise _corrupt(
            store,
            f"training {tid}: final_baseline {doc.final_baseline[:10]} is not where its decisions lead ({str(head)[:10]})",
        )
    if bundle:
        verify_git_bundle(store, doc)


def _certifies(doc: TrainingDoc) -> bool:
    """Does the training certify every epoch (its config's ``train.certify``)?"""
    config = doc.config
    train = config.get("train")
    return isinstance(train, dict) and train.get("certify") == EVERY_EPOCH


def _verify_epoch_verdict(store: RunStore, tid: str, e: EpochRecord, certifies: bool) -> str | None:
    """An epoch's verdict document verified (naming its baseline's certificate when the training
    ``certifies`` every epoch), and the epoch agreeing with it; its id (None for an epoch without one)."""
    if not e.verdict_id:
        if e.verdict is not None:
            raise _corrupt(store, f"training {tid}: epoch {e.epoch} has a verdict but no verdict document")
        return None
    vdoc = read_verdict(store, e.verdict_id)
    verify_verdict(store, vdoc)
    if certifies and "certified" not in vdoc.model_fields_set:
        raise _corrupt(
            store,
            f"training {tid}: epoch {e.epoch}'s verdict names no certificate of its baseline,"
            " and the training certifies every epoch (train.certify: every_epoch)",
        )
    for name in ("baseline_run", "candidate_run", "baseline_sha", "candidate_sha", "verdict"):
        if getattr(vdoc, name) != getattr(e, name):
            raise _corrupt(
                store, f"training {tid}: epoch {e.epoch} {name} is not its verdict {e.verdict_id}'s"
            )
    accept = bool(vdoc.verdict["accept"])
    if not e.skipped and e.decision != ("accepted" if accept else "rejected"):
        raise _corrupt(store, f"training {tid}: epoch {e.epoch} decision is not its verdict's")
    return e.verdict_id


def _verify_panels(store: RunStore, tid: str, e: EpochRecord) -> None:
    """A format-2 epoch's panel runs, each a run of the harness it names (baseline or candidate)
    checked against its cassettes, the deciding panel's (val, else train) the verdict's own; its
    smoke episodes the candidate's."""
    panels = e.panels
    if panels is None:
        return
    where = f"training {tid}: epoch {e.epoch}"
    if TRAIN not in panels:
        raise _corrupt(store, f"{where}: its panels are not a mapping with the training panel")
    runs = [
        (f"{name} {role}", run_id, sha)
        for name, p in panels.items()
        for role, run_id, sha in (
            ("baseline", p["baseline_run"], e.baseline_sha),
            ("candidate", p["candidate_run"], e.candidate_sha),
        )
    ]
    for what, run_id, sha in runs:
        if run_id is None:
            continue
        run = store.get_run(str(run_id))
        if run.harness_sha != sha:
            raise _corrupt(
                store,
                f"{where}: its {what} run {run_id} measured {run.harness_sha[:10]}, not {str(sha)[:10]}",
            )
        store.check_run(run)
    for cassette in e.smoke or []:  # the candidate's own episodes
        if store.get_episode(cassette).key.harness_sha != e.candidate_sha:  # verified
            raise _corrupt(store, f"{where}: its smoke episode {cassette} is not of its candidate")
    decides = panels.get(VAL) or panels[TRAIN]
    if (decides["baseline_run"], decides["candidate_run"]) != (e.baseline_run, e.candidate_run):
        raise _corrupt(store, f"{where}: its verdict's runs are not its deciding panel's")


def _recomputed_head(store: RunStore, doc: TrainingDoc, decided: list[EpochRecord]) -> str | None:
    """Where the decided epochs lead when the recorded runs go through the training's criterion
    and optimizer again; ``store corrupt`` where an epoch recorded another decision."""
    tid = doc.training_id
    epochs = doc.epochs
    try:
        config = training_config(doc, store)
        criterion, optimizer = chosen(doc, None, None)
        measurements = Measurements(store, doc, config)
        proposals = [Proposal(e.epoch, "", None) for e in epochs]
        result = walk(
            store,
            doc.model_copy(update={"epochs": decided}),
            _NoReapply(),  # type: ignore[arg-type]
            proposals[: len(decided)],
            measurements,
            criterion,
            optimizer,
        )
    except StoreCorrupt:
        raise
    except (ReplaykitError, KeyError, TypeError, ValueError) as exc:
        raise _corrupt(store, f"training {tid}: its epochs cannot be recomputed ({str(exc)[:120]})") from None
    for row, rec in zip(result["rows"], decided, strict=False):
        if row["verdict"] is not None and rec.verdict is not None and row["verdict"] != rec.verdict:
            raise _corrupt(  # e.g. a level its error budget does not give (error_budget.py)
                store,
                f"training {tid}: epoch {row['epoch']}'s verdict is not what its runs give under the "
                "training's criterion (and error budget): forged or corrupt",
            )
        if row["counterfactual_decision"] != row["recorded_decision"] or (
            row["counterfactual_candidate"] != row["recorded_candidate"]
        ):
            raise _corrupt(
                store,
                f"training {tid}: epoch {row['epoch']} records {row['recorded_decision']}"
                f" {str(row['recorded_candidate'])[:10]}, its runs and policy give"
                f" {row['counterfactual_decision']} {str(row['counterfactual_candidate'])[:10]} (forged or corrupt)",
            )
    head: str | None = result["head"]
    return head


#: the document kinds whose content is derived (and so recomputed before it is trusted)
DERIVED_KINDS = ("verdict", "training", "transfer", "compare")


def verify_document(store: RunStore, doc_id: str, kind: str) -> None:
    """Recompute a stored verdict, training, transfer or compare result (other kinds: nothing to recompute)."""
    if kind == "verdict":
        verified_verdict(store, doc_id)
    elif kind == "training":
        verified_training(store, doc_id)
    elif kind == "transfer":
        verified_transfer(store, doc_id)
    elif kind == "compare":  # its module measures (the rollout, vcrpy): loaded for a compare only
        from replaykit.episodes.compare import verified_compare

        verified_compare(store, doc_id)


# -- the one way a command reads a derived document: checked against its row and kind by the
#    store, then recomputed (bundle import and verify, cassettes verify, audit, diff, report,
#    the viewer and replay all read verdicts and trainings through these)


def read_verdict(store: DocumentStore, verdict_id: str) -> VerdictDoc:
    """A stored verdict as its model, checked against its row (not recomputed: ``verified_verdict``);
    a document of another shape is store corruption."""
    doc = store.get_doc(verdict_id, kind="verdict")
    try:
        return VerdictDoc.read(doc)
    except ValueError as exc:
        raise _corrupt(
            store, f"verdict {verdict_id}: its document is not a verdict ({str(exc)[:80]})"
        ) from None


def verified_verdict(store: RunStore, verdict_id: str) -> VerdictDoc:
    """A stored verdict, recomputed from its runs, criterion and certificates first."""
    doc = read_verdict(store, verdict_id)
    verify_verdict(store, doc)
    return doc


def verified_training(store: RunStore, training_id: str, bundle: bool = True) -> TrainingDoc:
    """A stored training, its verdicts, decisions, chain and final baseline recomputed first
    (``bundle``: its git bundle too; a caller that clones the bundle verifies it by cloning)."""
    doc = store.get_training(training_id)
    verify_training(store, doc, bundle=bundle)
    return doc
