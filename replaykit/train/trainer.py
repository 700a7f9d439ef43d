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

Beside the loop: ``config.py`` (the ``train:`` section), ``panels.py`` (the training,
validation and test panels), ``candidates.py`` (an epoch's candidate: proposed, then gated),
``gates.py`` (the smoke run, candidate tests, the circuit breaker), ``brief.py`` (what the
proposer reads), ``proposal.py`` (the proposer's cassette), ``documents.py`` (the training
document and verdicts), ``identity.py`` (its spec and id), ``exclusions.py`` (what a verdict
leaves out).

A training's *format* says which of these it was recorded with: 1 (before panels, the smoke
gate and the breaker; its documents carry no ``format``) replays as it was recorded; 2 is every
training made now (``format: 2`` in its document and its identity).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.keys import ModelId
from replaykit.core.errors import ConfigError, StoreCorrupt, TrainError
from replaykit.core.modes import RecordMode
from replaykit.core.progress import Progress, ProgressData, ProgressEvent
from replaykit.core.run_doc import RunDoc
from replaykit.core.stale import clean_stale_worktrees
from replaykit.core.training_doc import EpochRecord, TrainingDoc
from replaykit.episodes.config import RunConfig, load_config
from replaykit.episodes.engine_check import live_engine
from replaykit.episodes.run import measure, measure_recorded, open_harness, run_store
from replaykit.episodes.run_document import put_run_once
from replaykit.models.endpoint import model_id
from replaykit.train import adaptive, exclusions, gates, gitops, identity
from replaykit.train.candidates import Candidates
from replaykit.train.certification import EVERY_EPOCH, certify_baseline
from replaykit.train.config import train_config
from replaykit.train.criteria import make_criterion
from replaykit.train.documents import TrainingDocuments, training_summary
from replaykit.train.error_budget import epoch_criterion, verdict_decision
from replaykit.train.estimators import Estimator, make_estimator
from replaykit.train.loss import Loss, verdict_id_of
from replaykit.train.optimizers import Optimizer, make_optimizer
from replaykit.train.panels import (
    TEST,
    TRAIN,
    check_panels,
    configured,
    deciding,
    panel_config,
    recorded_templates,
    shown_epochs,
    smoke_config,
    smoke_keys,
)
from replaykit.train.parameter import Parameter
from replaykit.train.state import FORMAT, TrainingState
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
        replay_of: TrainingDoc | None = None,
        format: int = FORMAT,
    ) -> None:
        """``replay_of``: the recorded training this one replays (record mode none, nothing
        persisted): its model as recorded and its runs' keys stand for what a live training
        measures, so the replay needs no engine, no task folder and no Docker. ``format``: what
        the training is recorded with (``state.FORMAT``; a replay: its document's)."""
        if config is None:
            if config_path is None:
                raise ConfigError("Trainer needs config_path (a YAML config) or config")
            config = load_config(config_path)
        self.config = config
        self.train_cfg = train_config(config)
        if replay_of is None:
            check_panels(config)  # a task in two panels: one line, before anything is made
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
            ModelId(**replay_of.model.to_json())
            if replay_of is not None
            else model_id(config.model, live_engine(config.model, self.record_mode, persist))
        )
        #: a replay's keys per panel: its first recorded runs', at each SHA (``episodes/panel_keys.py``)
        self.templates = (
            {
                p: adaptive.base_template(t, config)
                for p, t in recorded_templates(self.store, replay_of).items()
            }
            if replay_of is not None
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
        self.state.format = format
        self.state.spec_digest = self.spec_digest
        #: the circuit breaker's line when it stopped the training (``gates.tripped``), else None
        self.stopped: str | None = None
        self.paid = self.state.paid  # what this invocation sent to endpoints
        self.documents = TrainingDocuments(self.state, self.summary)
        self._resolve_training()
        self.parameter = Parameter(self.harness, self.training_id, persist)
        self.parameter.register_hook(self._settled)
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
        """What its id hashes besides its initial baseline (``identity.py``)."""
        return identity.spec_digest(
            self.config,
            self.train_cfg,
            self.model_identity,
            self.estimator,
            self.criterion,
            self.optimizer,
            self.state.format,
        )

    @property
    def deciding(self) -> str:
        """The panel the criterion decides on (``val`` when given; format 1: the training panel)."""
        return deciding(self.config) if self.state.format >= 2 else TRAIN

    @property
    def panels(self) -> list[str]:
        return configured(self.config) if self.state.format >= 2 else [TRAIN]

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
            if head in doc.chain and doc.training_id == (self.replay_of or doc).training_id:
                state.training_id, state.initial_sha, state.recorded = (
                    doc.training_id,
                    doc.initial_sha,
                    doc.epochs,
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
                f"training {self.replay_of.training_id}: its spec and initial baseline do not give its id",
                "",
                str(self.store.location),
            )
        state.initial_sha = head
        state.training_id = identity.training_id(self.spec_digest, head)

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
        skips: list[tuple[int, str]] = []  # the trailing skipped epochs (the circuit breaker)
        for epoch in range(n):
            head = self.harness.resolve()
            parent = self.optimizer.parent(head)  # the HEAD, or (frontier optimizers) a kept candidate
            baseline_sha = self.recorded[epoch].baseline_sha if epoch < len(self.recorded) else parent
            if baseline_sha not in (head, parent) and not gitops.is_ancestor(
                self.harness.repo, baseline_sha, head
            ):
                raise TrainError(
                    f"baseline {baseline_sha[:10]} of recorded epoch {epoch} is not on {self.harness.branch}; start a new training"
                )
            runs = {
                p: self._measure(baseline_sha, f"epoch {epoch}: baseline" + self._on(p), panel=p)
                for p in self.panels
            }
            certified = (
                self._certify(runs[self.deciding], f"epoch {epoch}: baseline") if self.certifies else None
            )
            loss = self._propose_and_measure(epoch, baseline_sha, runs, certified)
            self.losses.append(loss)
            self.progress("epoch", {"epoch": epoch})
            yield loss
            skips = [*skips, (epoch, loss.skipped)] if loss.skipped else []
            if self.state.format >= 2 and epoch + 1 < n:
                self.stopped = gates.tripped(skips, self.train_cfg.max_consecutive_skips, n)
                if self.stopped:
                    self.progress("note", {"message": self.stopped})
                    return

    def _on(self, panel: str) -> str:
        """`` (val panel)`` in a label, when the training measures more than one panel."""
        return f" ({panel} panel)" if len(self.panels) > 1 else ""

    def _measure(
        self,
        sha: str,
        label: str,
        baseline_sha: str | None = None,
        panel: str = TRAIN,
        smoke: bool = False,
        only: RunConfig | None = None,
    ) -> RunDoc:
        """``sha`` measured (or reused) on ``panel`` (``smoke``: on the smoke run's part of it;
        ``only``: on this part of it, an adaptive round's; neither stores a run document)."""
        config = only or panel_config(self.config, panel)
        if (
            self.templates is not None and only is None
        ):  # a replay: the recorded run at this SHA, from its cassettes
            template = self.templates[panel]
            if smoke:
                template = smoke_keys(template, self.train_cfg.smoke)
            repo = str(self.harness.path)
            return measure_recorded(config, self.store, sha, template, repo).run
        if smoke:
            config = smoke_config(self.config) or config
        result = measure(
            config,
            record_mode=self.record_mode,
            sha=sha,
            store=self.store,
            keep_going=self.keep_going,
            progress=self._episode_progress(label),
            persist=self.persist,
            baseline_sha=baseline_sha,  # a candidate: served its baseline's answers first
            document=not smoke and only is None,
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

    def _certify(self, baseline: RunDoc, label: str) -> list[str]:
        """Every certificate of the baseline's tasks (``certification.py``): re-executed where
        none is stored for its episodes; a replay re-executes nothing."""
        return certify_baseline(
            self.store,
            baseline,
            replaying=self.record_mode is RecordMode.NONE,
            tasks=list(panel_config(self.config, self.deciding).panel.tasks),
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
        self, epoch: int, baseline_sha: str, runs: dict[str, RunDoc], certified: list[str] | None = None
    ) -> Loss:
        baseline = runs[self.deciding]
        loss = Loss(epoch, baseline_sha, baseline.run_id, on_backward=self._backward, store=self.store)
        loss.certified = certified
        if self.state.format >= 2:
            loss.panels = {p: {"baseline_run": r.run_id, "candidate_run": None} for p, r in runs.items()}
        candidates = Candidates(self.state, self._measure)
        sha = candidates.propose(loss, runs[TRAIN])  # the proposer sees the training panel only
        if sha is None or candidates.gate(loss, sha):
            return loss
        for panel in dict.fromkeys([TRAIN, self.deciding]) if self.state.format >= 2 else [TRAIN]:
            run = self._measure(sha, f"epoch {epoch}: candidate" + self._on(panel), baseline_sha, panel)
            if loss.panels:
                loss.panels[panel]["candidate_run"] = run.run_id
            candidate = run
        if self.config.panel.adaptive is not None:
            baseline, candidate = self._adaptive(loss, baseline, candidate)
        loss.candidate_run = candidate.run_id
        rec = self.recorded[epoch] if epoch < len(self.recorded) else None
        # by certificate, named in the verdict
        excluded = exclusions.epoch_exclusions(self.store, rec, baseline, candidate, certified)
        loss.certificates = exclusions.certificate_ids(excluded)
        loss.verdict = self.epoch_criterion(epoch)(candidate, baseline, exclusions.reasons(excluded))
        return loss

    def _adaptive(self, loss: Loss, baseline: RunDoc, candidate: RunDoc) -> tuple[RunDoc, RunDoc]:
        """Adaptive seeds (``adaptive.py``): both deciding runs extended where the decision is
        open; the verdict judges them, the deciding panel names them, the epoch its stopping points."""
        config = panel_config(self.config, self.deciding)

        def seed_run(sha: str, tasks: list[str], seed: int, base: str | None) -> RunDoc:
            label = f"epoch {loss.epoch}: {'candidate' if base else 'baseline'} seed {seed}"
            if self.templates is not None:  # a replay: the recorded round, from its cassettes
                keys = adaptive.seed_keys(self.templates[self.deciding], tasks, seed)
                return measure_recorded(config, self.store, sha, keys, str(self.harness.path)).run
            return self._measure(sha, label, base, only=adaptive.seed_config(config, tasks, seed))

        alpha = adaptive.level(self.epoch_criterion(loss.epoch))
        base, cand, loss.adaptive = adaptive.extend(self.store, config, baseline, candidate, alpha, seed_run)
        for run in (base, cand) if self.persist else ():
            put_run_once(self.store, run)
        loss.baseline_run = base.run_id
        if loss.panels:
            loss.panels[self.deciding] = {"baseline_run": base.run_id, "candidate_run": cand.run_id}
        self.progress("note", {"message": f"epoch {loss.epoch}: {adaptive.summary(loss.adaptive)}"})
        return base, cand

    def epoch_criterion(self, epoch: int) -> Criterion:
        """The criterion an epoch is judged by: at its share of ``train.error_budget`` when set
        (``error_budget.py``: what the epochs before it decided), else the training's."""
        earlier = [verdict_decision(lo.verdict, lo.skipped) for lo in self.losses[:epoch]]
        return epoch_criterion(self.criterion, self.train_cfg.error_budget, self.train_cfg.epochs, earlier)

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

    def summary(self) -> TrainingDoc:
        return training_summary(self.state)

    def to_json(self) -> dict[str, object]:
        """``train --json``: the training document, its epochs with each panel's solve rates and
        movements (``shown_epochs``), why the breaker stopped it (when it did), what this
        invocation paid, the store."""
        summary = self.summary()
        out: dict[str, object] = {**summary.to_json(), "epochs": shown_epochs(self.store, summary.epochs)}
        if self.stopped:
            out["stopped"] = self.stopped
        return {**out, **self.paid.to_dict(), "store": self.config.store_location}

    def _settled(self, loss: Loss) -> None:
        """After ``optimizer.step()``: an accepted candidate is measured on the test panel (never
        deciding; ``panels.py``), then the training document is saved."""
        test = loss.panels.get(TEST) if loss.panels else None
        if test is not None and loss.promoted_or_none and loss.candidate_sha:
            label = f"epoch {loss.epoch}: accepted candidate (test panel)"
            test["candidate_run"] = self._measure(loss.candidate_sha, label, panel=TEST).run_id
        self._save()

    def _save(self) -> None:
        self.documents.save()
