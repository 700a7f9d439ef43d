"""The Trainer: epochs of measure → propose → measure → criterion → Loss.

    trainer = Trainer(config_path="configs/train_harness.yaml",
                      estimator=AgenticEstimator(backend=OpenAIBackend(...)),
                      criterion=StrictPareto(), optimizer=GreedyMonotonic())
    for loss in trainer.epochs(30):
        loss.backward()   # records the verdict
        optimizer.step()  # fast-forwards the baseline, or keeps the candidate as rejected

Everything is keyed, so running the same training again (after a crash, or from a
fresh harness repository with the same store) recomputes each epoch from
cassettes: no model call, no re-measurement, the same candidate SHAs.

Beside the loop: ``config.py`` (the ``train:`` section), ``brief.py`` (what the
proposer reads), ``proposal.py`` (the proposer's cassette), ``documents.py`` (the
training document and verdicts).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Iterator

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.keys import ModelId
from replaykit.core.determinism import digest_of
from replaykit.core.errors import ConfigError, HarnessError, StoreCorrupt, TrainError
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress, ProgressData, ProgressEvent
from replaykit.core.records import EpochRecord, RunDoc, RunDocument, TrainingDocument
from replaykit.core.stale import clean_stale_worktrees
from replaykit.episodes.config import RunConfig, load_config
from replaykit.episodes.engine_check import live_engine
from replaykit.episodes.harness import load_solve
from replaykit.episodes.panel_keys import template_keys
from replaykit.episodes.run import measure, measure_recorded, open_harness, run_store
from replaykit.models.endpoint import model_id
from replaykit.train import exclusions, gitops
from replaykit.train.brief import training_brief
from replaykit.train.certification import EVERY_EPOCH, certify_baseline
from replaykit.train.config import train_config
from replaykit.train.criteria import make_criterion
from replaykit.train.documents import TrainingDocuments, training_summary
from replaykit.train.error_budget import epoch_criterion, verdict_decision
from replaykit.train.estimators import Estimator, make_estimator
from replaykit.train.loss import Loss, verdict_id_of
from replaykit.train.optimizers import Optimizer, make_optimizer
from replaykit.train.parameter import Parameter
from replaykit.train.proposal import proposal_session
from replaykit.train.state import TrainingState
from replaykit.train.verdicts import Criterion


class Trainer:
    """Epochs of measure → propose → measure → judge over one harness branch (see the module doc)."""

    def __init__(
        self,
        config_path: str | Path | None = None,
        estimator: Estimator | None = None,
        criterion: Criterion | None = None,
        optimizer: Optimizer | None = None,
        *,
        config: RunConfig | None = None,
        record_mode: RecordMode = RecordMode.ONCE,
        progress: Progress | None = None,
        persist: bool = True,
        store: StoreBackend | None = None,
        keep_going: bool = False,
        replay_of: TrainingDocument | None = None,
    ) -> None:
        """``replay_of``: the recorded training this one replays (record mode none, nothing
        persisted): its model as recorded and its runs' keys stand for what a live training
        measures, so the replay needs no engine, no task folder and no Docker."""
        if config is None:
            if config_path is None:
                raise ConfigError("Trainer needs config_path (a YAML config) or config")
            config = load_config(config_path)
        self.config = config
        self.train_cfg = train_config(config)
        crit = dict(self.train_cfg.criterion)
        opt = dict(self.train_cfg.optimizer)
        self.estimator = estimator or make_estimator(self.train_cfg.estimator, base_dir=config.base_dir)
        self.criterion = criterion or make_criterion(str(crit.pop("name", "strict_pareto")), **crit)
        self.optimizer = optimizer or make_optimizer(str(opt.pop("name", "greedy_monotonic")), **opt)
        self.record_mode = RecordMode.parse(record_mode)
        self.keep_going = keep_going
        self._noted: set[str] = set()  # notes of its measures already said
        self.progress: Progress = progress or (lambda event, data: None)
        self.persist = persist
        self.store = store or run_store(config, self.record_mode)
        self.replay_of = replay_of
        #: the task model as keys name it: measured now (a self-hosted engine), or as recorded
        self.model_identity = (
            ModelId(**replay_of["model"])
            if replay_of is not None
            else model_id(config.model, live_engine(config.model, self.record_mode, persist))
        )
        #: a replay's keys: its first recorded run's, at each SHA (``episodes/panel_keys.py``)
        self.template = (
            template_keys(self.store, self.store.get_run(replay_of["runs"][0]).cassettes)
            if replay_of is not None and replay_of["runs"]
            else None
        )
        self.harness = open_harness(config, create=record_mode != "none")
        if persist:  # a killed training's registered worktrees (only those of dead processes)
            clean_stale_worktrees(self.harness.repo)
        #: what documents and proposer sessions read of this training (never the Trainer itself)
        self.state = TrainingState(
            self.config,
            self.train_cfg,
            self.store,
            self.harness,
            self.estimator,
            self.criterion,
            self.optimizer,
            self.record_mode,
            self.persist,
            self.progress,
            model=self.model_identity,
        )
        self.state.spec_digest = self.spec_digest
        self.paid = self.state.paid  # what this invocation sent to endpoints
        self.documents = TrainingDocuments(self.state, self.summary)
        self._resolve_training()
        self.parameter = Parameter(self.harness, self.training_id, persist)
        self.parameter.register_hook(lambda loss: self._save())
        self.optimizer.attach(self.parameter)

    # -- identity and epochs (kept in the state) ---------------------------------------
    @property
    def training_id(self) -> str:
        return self.state.training_id

    @property
    def initial_sha(self) -> str:
        return self.state.initial_sha

    @property
    def recorded(self) -> list[EpochRecord]:
        """The epochs a recorded training holds (resuming or replaying it), else none."""
        return self.state.recorded

    @property
    def losses(self) -> list[Loss]:
        """The epochs judged in this process, in order."""
        return self.state.losses

    # -- identity ------------------------------------------------------------------
    @property
    def spec_digest(self) -> str:
        return digest_of(
            {
                "config": self.config.digest(),
                "name": self.config.name,
                "model": self.model_identity.__dict__,
                "panel": self.config.panel.model_dump(),
                "estimator": self.estimator.identity(),
                "criterion": [self.criterion.name, self.criterion.params()],
                "optimizer": [self.optimizer.name, self.optimizer.params()]
                if self.optimizer.params()
                else self.optimizer.name,
                "seed": self.train_cfg.seed,
                "surface": self.train_cfg.patch_surface,
                **({"certify": EVERY_EPOCH} if self.certifies else {}),  # absent: recorded ids stay
                **({"error_budget": b} if (b := self.train_cfg.error_budget) is not None else {}),
            }
        )

    @property
    def certifies(self) -> bool:
        """``train.certify: every_epoch``: each epoch's baseline is certified before it is judged."""
        return self.train_cfg.certify == EVERY_EPOCH

    def _resolve_training(self) -> None:
        head = self.harness.resolve()
        self.harness.ensure_clean()
        self.harness.check_entry(head, self.config.harness.entry)
        state = self.state
        for doc in self.store.find_trainings(self.spec_digest):
            if head in doc["chain"] and doc["training_id"] == (self.replay_of or doc)["training_id"]:
                state.training_id, state.initial_sha, state.recorded = (
                    doc["training_id"],
                    doc["initial_sha"],
                    doc["epochs"],
                )
                what = (  # a replay (persist=False) recomputes the recording; it resumes nothing
                    f"resuming training {self.training_id}: {len(self.recorded)} epoch(s) recorded"
                    if self.persist
                    else f"replaying training {self.training_id}: {len(self.recorded)} recorded epoch(s), offline"
                )
                self.progress("note", {"message": what})
                return
        if self.replay_of is not None:  # its spec (config, model, panel, ...) must give its id
            raise StoreCorrupt(
                f"training {self.replay_of['training_id']}: its spec and initial baseline do not give its id",
                "",
                str(self.store.location),
            )
        state.initial_sha = head
        state.training_id = digest_of([self.spec_digest, head])[:16]

    def verdict_id(self, loss: Loss) -> str:
        criterion = self.epoch_criterion(loss.epoch)
        return verdict_id_of(
            loss.baseline_run,
            loss.candidate_run,
            criterion.name,
            criterion.params(),
            loss.certificates,
            loss.certified,
        )

    # -- the loop ------------------------------------------------------------------
    def epochs(self, n: int | None = None) -> Iterator[Loss]:
        n = self.train_cfg.epochs if n is None else n
        self.progress("outer", {"total": n, "label": "epoch"})
        if not self.persist:
            yield from self._epochs(n)
            return
        with self.store.leasing():  # what the training document will name, until it names it
            yield from self._epochs(n)

    def _epochs(self, n: int) -> Iterator[Loss]:
        for epoch in range(n):
            head = self.harness.resolve()
            parent = self.optimizer.parent(head)  # the HEAD, or (frontier optimizers) a kept candidate
            baseline_sha = self.recorded[epoch]["baseline_sha"] if epoch < len(self.recorded) else parent
            if baseline_sha not in (head, parent) and not gitops.is_ancestor(
                self.harness.repo, baseline_sha, head
            ):
                raise TrainError(
                    f"baseline {baseline_sha[:10]} of recorded epoch {epoch} is not on {self.harness.branch}; start a new training"
                )
            baseline = self._measure(baseline_sha, f"epoch {epoch}: baseline")
            certified = self._certify(baseline, f"epoch {epoch}: baseline") if self.certifies else None
            loss = self._propose_and_measure(epoch, baseline_sha, baseline, certified)
            self.losses.append(loss)
            self.progress("epoch", {"epoch": epoch})
            yield loss

    def _measure(self, sha: str, label: str, baseline_sha: str | None = None) -> RunDocument:
        if self.template is not None:  # a replay: the recorded run at this SHA, from its cassettes
            return measure_recorded(self.config, self.store, sha, self.template, str(self.harness.path)).run
        result = measure(
            self.config,
            record_mode=self.record_mode,
            sha=sha,
            store=self.store,
            keep_going=self.keep_going,
            progress=self._episode_progress(label),
            persist=self.persist,
            baseline_sha=baseline_sha,  # a candidate: served its baseline's answers first
        )
        self.paid.task_model_calls += result.model_calls
        self.paid.reused_events += result.reused_events
        if result.reused and not result.recorded:
            message = f"{label} {sha[:10]}: reused {len(result.reused)} cassette(s), no model calls"
        else:
            message = (
                f"{label} {sha[:10]}: recorded {len(result.recorded)}, reused {len(result.reused)}"
                f" · {result.model_calls} model call(s)"
                + (f", {result.reused_events} event(s) served from donors" if result.reused_events else "")
            )
        self.progress("note", {"message": message})
        return result.run

    def _certify(self, baseline: RunDocument, label: str) -> list[str]:
        """Every certificate of the baseline's tasks (``certification.py``): re-executed where
        none is stored for its episodes; a replay re-executes nothing."""
        return certify_baseline(
            self.store,
            baseline,
            replaying=self.record_mode is RecordMode.NONE,
            tasks=list(self.config.panel.tasks),
            root=self.config.base_dir,
            progress=self.progress,
            label=label,
        )

    def _episode_progress(self, label: str) -> Progress:
        """Forward a measure's per-episode events, labelled with the epoch and side."""

        def forward(event: ProgressEvent, data: ProgressData) -> None:
            if event in ("plan", "episode"):
                self.progress(event, {**data, "label": label})
            elif event == "note" and (message := str(data.get("message", ""))) not in self._noted:
                self._noted.add(message)  # said once per training, not once per measure
                self.progress("note", {"message": f"{label}: {message}"})

        return forward

    def _propose_and_measure(
        self, epoch: int, baseline_sha: str, baseline: RunDocument, certified: list[str] | None = None
    ) -> Loss:
        loss = Loss(epoch, baseline_sha, baseline["run_id"], on_backward=self._backward, store=self.store)
        loss.certified = certified
        brief = self.brief(epoch, baseline_sha, baseline)
        repo = self.harness.repo
        with gitops.worktree(repo, baseline_sha) as workdir:
            with proposal_session(self.state, epoch, baseline_sha, brief) as (session, cassette_id):
                try:
                    loss.description = self.estimator.edit(workdir, brief, session, epoch)
                except TrainError as exc:
                    loss.skipped = str(exc)
            loss.proposal_cassette = cassette_id
            if loss.skipped:
                return loss
            loss.changed = gitops.changed_paths(workdir)
            if not loss.changed:
                said = loss.description.strip() if loss.description else ""
                loss.skipped = "empty diff: the estimator changed nothing" + (f" ({said})" if said else "")
                return loss
            sha = gitops.commit_candidate(workdir, f"epoch {epoch}: {loss.description}"[:200], epoch)
        loss.candidate_sha = sha
        if self.persist:
            gitops.set_ref(repo, gitops.candidate_ref(self.training_id, epoch), sha)
        outside = [
            p
            for p in loss.changed
            if not any(fnmatch.fnmatch(p, pat) for pat in self.train_cfg.patch_surface)
        ]
        if outside:
            loss.skipped = f"edits outside the patch surface ({', '.join(self.train_cfg.patch_surface)}): {', '.join(outside)}"
            return loss
        files = self.harness.tree_files(sha)
        if self.persist:
            self.store.put_tree(sha, files)
        try:
            load_solve(self.store.materialise_tree(sha, files), self.config.harness.entry)
        except HarnessError as exc:
            loss.skipped = f"harness no longer imports: {exc}"
            return loss
        candidate = self._measure(sha, f"epoch {epoch}: candidate", baseline_sha)
        loss.candidate_run = candidate["run_id"]
        excluded = self._exclusions(
            epoch, baseline, candidate, certified
        )  # by certificate, named in the verdict
        loss.certificates = exclusions.certificate_ids(excluded)
        loss.verdict = self.epoch_criterion(epoch)(
            RunDoc.from_dict(candidate), RunDoc.from_dict(baseline), exclusions.reasons(excluded)
        )
        return loss

    def epoch_criterion(self, epoch: int) -> Criterion:
        """The criterion an epoch is judged by: at its share of ``train.error_budget`` when set
        (``error_budget.py``: what the epochs before it decided), else the training's."""
        earlier = [verdict_decision(lo.verdict, lo.skipped) for lo in self.losses[:epoch]]
        return epoch_criterion(self.criterion, self.train_cfg.error_budget, self.train_cfg.epochs, earlier)

    def _exclusions(
        self, epoch: int, baseline: RunDocument, candidate: RunDocument, certified: list[str] | None
    ) -> exclusions.Exclusions:
        """The forked certificates an epoch's verdict leaves tasks out by: certifying every epoch,
        its baseline's (made this epoch); else those the store holds for both runs, except that a
        recorded epoch judging the very same runs again (resumed, replayed) takes the ones its
        verdict names, checked: certificates made since never change a recorded verdict."""
        if certified is not None:
            return exclusions.forked(self.store, baseline)
        rec = self.recorded[epoch] if epoch < len(self.recorded) else None
        runs = (baseline["run_id"], candidate["run_id"])
        if rec and rec.get("verdict_id") and (rec.get("baseline_run"), rec.get("candidate_run")) == runs:
            doc = self.store.get_doc(str(rec["verdict_id"]), kind="verdict")
            if doc.get("certificates") is not None:  # absent: recorded before verdicts named them
                return exclusions.named_exclusions(
                    self.store, doc["verdict_id"], (baseline, candidate), doc["certificates"]
                )
        return exclusions.forked(self.store, baseline, candidate)

    def brief(self, epoch: int, baseline_sha: str, baseline: RunDocument) -> str:
        """What the proposer reads for ``epoch`` (:mod:`replaykit.train.brief`)."""
        return training_brief(
            epoch=epoch,
            training_id=self.training_id,
            patch_surface=self.train_cfg.patch_surface,
            baseline_sha=baseline_sha,
            baseline=baseline,
            tried=self.losses,
            store=self.store,
            files=self.harness.tree_files(baseline_sha),
        )

    # -- backward ------------------------------------------------------------------
    def _backward(self, loss: Loss) -> None:
        """What ``loss.backward()`` calls: persist the verdict, then set the parameter's ``.grad``."""
        self.record_verdict(loss)
        self.parameter.grad = loss

    def record_verdict(self, loss: Loss) -> None:
        """Persist an epoch's verdict (what ``loss.backward()`` records) and the training document."""
        self.documents.put_verdict(loss)
        self._save()

    def chain(self) -> list[str]:
        return self.state.chain()

    def summary(self) -> TrainingDocument:
        return training_summary(self.state)

    def _save(self) -> None:
        self.documents.save()
