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
"""

from __future__ import annotations

import contextlib
import fnmatch
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replaykit.cassette.events import Episode, EnvEvent
from replaykit.cassette.keys import CassetteKey
from replaykit.capture.matchers import Scrubber
from replaykit.cassette.store import Store
from replaykit.capture.tape import Tape
from replaykit.config import RunConfig, Seed, load_config, validation_line
from replaykit.determinism import digest_of, sha256_hex
from replaykit.errors import CassetteNotFound, ConfigError, HarnessError, TrainError
from replaykit.harness import load_solve
from replaykit.models.endpoint import OFFLINE_BASE_URL, api_key, model_id, open_endpoint
from replaykit.models.failures import EndpointFailure, describe, endpoint_failure
from replaykit.run import measure, open_harness, reusable, secrets_for
from replaykit.stale import clean_stale_worktrees
from replaykit.train import gitops
from replaykit.train.backends import ProposalSession
from replaykit.train.criteria import Criterion, make_criterion
from replaykit.train.estimators import Estimator, PatchQueue, make_estimator
from replaykit.train.loss import Loss
from replaykit.train.optimizers import Optimizer, make_optimizer
from replaykit.records import VerdictDoc
from replaykit.train.parameter import Parameter


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    epochs: int = Field(default=5, ge=1)
    seed: Seed = 0
    patch_surface: list[str] = Field(default_factory=lambda: ["harness.py"])
    estimator: dict[str, Any] = Field(
        default_factory=lambda: {
            "kind": "agentic",
            "backend": {"kind": "openai", "model": "reference-proposer", "base_url": "builtin"},
        }
    )
    criterion: dict[str, Any] = Field(default_factory=lambda: {"name": "strict_pareto"})
    optimizer: dict[str, Any] = Field(default_factory=lambda: {"name": "greedy_monotonic"})


def train_config(config: RunConfig) -> TrainConfig:
    try:
        return TrainConfig.model_validate(config.train or {})
    except ValidationError as exc:
        raise ConfigError(f"config {validation_line(exc, 'train.')}") from None


class Trainer:
    def __init__(
        self,
        config_path: str | Path | None = None,
        estimator: Estimator | None = None,
        criterion: Criterion | None = None,
        optimizer: Optimizer | None = None,
        *,
        config: RunConfig | None = None,
        record_mode: str = "once",
        progress: Any = None,
        persist: bool = True,
        store: Store | None = None,
        keep_going: bool = False,
    ) -> None:
        if config is None:
            if config_path is None:
                raise ConfigError("Trainer needs config_path (a YAML config) or config")
            config = load_config(config_path)
        self.config = config
        self.train_cfg = train_config(config)
        crit = dict(self.train_cfg.criterion)
        opt = dict(self.train_cfg.optimizer)
        self.estimator = estimator or make_estimator(self.train_cfg.estimator, base_dir=config.base_dir)
        self.criterion = criterion or make_criterion(crit.pop("name", "strict_pareto"), **crit)
        self.optimizer = optimizer or make_optimizer(opt.pop("name", "greedy_monotonic"), **opt)
        self.record_mode = record_mode
        self.keep_going = keep_going
        self.progress = progress or (lambda event, data: None)
        self.persist = persist
        self.store = store or Store(config.store_path)
        self.harness = open_harness(config, create=record_mode != "none")
        if persist:  # a killed training's registered worktrees (only those of dead processes)
            clean_stale_worktrees(self.harness.repo)
        self.losses: list[Loss] = []
        self._resolve_training()
        self.parameter = Parameter(self.harness, self.training_id, persist)
        self.parameter.register_hook(lambda loss: self._save())
        self.optimizer.attach(self.parameter)

    # -- identity ------------------------------------------------------------------
    @property
    def spec_digest(self) -> str:
        return digest_of(
            {
                "config": self.config.digest(),
                "name": self.config.name,
                "model": model_id(self.config.model).__dict__,
                "panel": self.config.panel.model_dump(),
                "estimator": self.estimator.identity(),
                "criterion": [self.criterion.name, self.criterion.params()],
                "optimizer": [self.optimizer.name, self.optimizer.params()]
                if self.optimizer.params()
                else self.optimizer.name,
                "seed": self.train_cfg.seed,
                "surface": self.train_cfg.patch_surface,
            }
        )

    def _resolve_training(self) -> None:
        head = self.harness.resolve()
        self.harness.ensure_clean()
        self.recorded: list[dict[str, Any]] = []
        for doc in self.store.find_trainings(self.spec_digest):
            if head in doc["chain"]:
                self.training_id, self.initial_sha, self.recorded = (
                    doc["training_id"],
                    doc["initial_sha"],
                    doc["epochs"],
                )
                self.progress(
                    "note",
                    {
                        "message": f"resuming training {self.training_id}: {len(self.recorded)} epoch(s) recorded"
                    },
                )
                return
        self.initial_sha = head
        self.training_id = digest_of([self.spec_digest, head])[:16]

    def verdict_id(self, loss: Loss) -> str:
        return digest_of(
            [loss.baseline_run, loss.candidate_run, self.criterion.name, self.criterion.params()]
        )[:16]

    # -- the loop ------------------------------------------------------------------
    def epochs(self, n: int | None = None) -> Iterator[Loss]:
        n = self.train_cfg.epochs if n is None else n
        self.progress("outer", {"total": n, "label": "epoch"})
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
            loss = self._propose_and_measure(epoch, baseline_sha, baseline)
            self.losses.append(loss)
            self.progress("epoch", {"epoch": epoch})
            yield loss

    def _measure(self, sha: str, label: str) -> dict[str, Any]:
        result = measure(
            self.config,
            record_mode=self.record_mode,
            sha=sha,
            store=self.store,
            keep_going=self.keep_going,
            progress=self._episode_progress(label),
            persist=self.persist,
        )
        if result.reused and not result.recorded:
            self.progress(
                "note",
                {"message": f"{label} {sha[:10]}: reused {len(result.reused)} cassette(s), no model calls"},
            )
        else:
            self.progress(
                "note",
                {
                    "message": f"{label} {sha[:10]}: recorded {len(result.recorded)}, reused {len(result.reused)}"
                },
            )
        return result.run

    def _episode_progress(self, label: str) -> Callable[[str, dict[str, Any]], None]:
        """Forward a measure's per-episode events, labelled with the epoch and side."""
        return lambda event, data: (
            self.progress(event, dict(data, label=label)) if event in ("plan", "episode") else None
        )

    def _propose_and_measure(self, epoch: int, baseline_sha: str, baseline: dict[str, Any]) -> Loss:
        loss = Loss(self, epoch, baseline_sha, baseline["run_id"])
        brief = self.brief(epoch, baseline_sha, baseline)
        repo = self.harness.repo
        with gitops.worktree(repo, baseline_sha) as workdir:
            with self._proposal(epoch, baseline_sha, brief) as (session, cassette_id):
                try:
                    loss.description = self.estimator.edit(workdir, brief, session, epoch)
                except TrainError as exc:
                    loss.skipped = str(exc)
            loss.proposal_cassette = cassette_id
            if loss.skipped:
                return loss
            loss.changed = gitops.changed_paths(workdir)
            if not loss.changed:
                loss.skipped = "empty diff: the estimator changed nothing"
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
        candidate = self._measure(sha, f"epoch {epoch}: candidate")
        loss.candidate_run = candidate["run_id"]
        loss.verdict = self.criterion(candidate, baseline, self._forked(baseline, candidate))
        return loss

    def _forked(self, *runs: dict[str, Any]) -> dict[str, str]:
        try:
            from replaykit.certify import forked_tasks
        except ImportError:
            return {}
        out: dict[str, str] = {}
        for run in runs:
            out.update(forked_tasks(self.store, run))
        return out

    # -- the proposer's cassette ------------------------------------------------------
    @contextlib.contextmanager
    def _proposal(
        self, epoch: int, baseline_sha: str, brief: str
    ) -> Iterator[tuple[ProposalSession | None, str | None]]:
        mcfg = self.estimator.model_config()
        if mcfg is None:
            yield None, None
            return
        key = CassetteKey(
            baseline_sha,
            "proposal",
            sha256_hex(brief),
            model_id(mcfg),
            self.train_cfg.seed,
            self.spec_digest[:16],
            kind="proposal",
            extra=(("epoch", str(epoch)), *self.estimator.key_extra()),
        )
        if self.record_mode == "none":
            replaying = self.store.has(key.id)
        else:  # a stored proposal holding an endpoint error (older versions) is re-recorded
            replaying = self.record_mode != "all" and reusable(self.store, key.id)
        if not replaying and (self.record_mode == "none" or not self.persist):
            raise CassetteNotFound(
                f"no proposal cassette for epoch {epoch} of training {self.training_id} (key {key.id}); record it first"
            )
        if replaying:
            tape = Tape(key.id, recorded=list(self.store.get_episode(key.id).events))
            session = ProposalSession(tape, OFFLINE_BASE_URL, "replaykit-offline", self.train_cfg.seed)
            yield session, key.id
            tape.check_complete("the proposer")
            self.progress(
                "note",
                {"message": f"epoch {epoch}: proposal replayed from cassette {key.id[:12]} (no model calls)"},
            )
            return
        tape = Tape(key.id)
        with open_endpoint(mcfg) as endpoint:
            scrubber = Scrubber(secrets_for(self.config, endpoint.api_key or api_key(mcfg)))

            def check_endpoint() -> (
                None
            ):  # a proposer's endpoint failure stops the training; nothing is stored
                failure = endpoint_failure(tape.events, tape.transport_errors)
                if failure is not None:
                    raise EndpointFailure(
                        scrubber.text(
                            describe(
                                failure,
                                endpoint.base_url,
                                mcfg.name,
                                mcfg.api_key_env,
                                "proposer endpoint",
                                "train.estimator.backend.model",
                            )
                        )
                    )

            try:
                yield (
                    ProposalSession(
                        tape,
                        endpoint.base_url,
                        endpoint.api_key,
                        self.train_cfg.seed,
                        scrubber,
                        tuple(self.config.record.rules),
                    ),
                    key.id,
                )
            except Exception:
                check_endpoint()
                raise
            check_endpoint()
        self.store.put_episode(
            Episode(
                key,
                tape.events,
                {"kind": "proposal", "brief": brief, "epoch": epoch, "backend": self.estimator.identity()},
            )
        )

    def brief(self, epoch: int, baseline_sha: str, baseline: dict[str, Any]) -> str:
        tried = [f"- epoch {lo.epoch}: {lo.description} => {lo.to_dict()['decision']}" for lo in self.losses]
        failed = []
        for e in baseline["episodes"]:
            if e["passed"]:
                continue
            envs = [ev for ev in self.store.get_episode(e["cassette_id"]).events if isinstance(ev, EnvEvent)]
            if envs:
                last = envs[-1]
                tail = (last.observation.stderr or last.observation.stdout).strip().splitlines()[-1:] or [""]
                failed.append(
                    f"- {e['task_id']}#{e['seed']}: last command `{last.action}` exit {last.observation.exit_code}: {tail[0][:160]}"
                )
            else:
                failed.append(f"- {e['task_id']}#{e['seed']}: no command was run")
        files = self.harness.tree_files(baseline_sha)
        sources = [
            f"=== {path} ===\n{data.decode('utf-8', 'replace')}=== end {path} ==="
            for path, (_, data) in sorted(files.items())
            if any(fnmatch.fnmatch(path, pat) for pat in self.train_cfg.patch_surface)
        ]
        return "\n".join(
            [
                f"Epoch {epoch} of training {self.training_id}.",
                f"Patch surface: {', '.join(self.train_cfg.patch_surface)}",
                f"Baseline {baseline_sha[:10]} solved {baseline['solved']}/{baseline['total']} task instances.",
                "",
                "Previously tried proposals:",
                *(tried or ["- (none)"]),
                "",
                f"Failed episodes on the baseline ({len(failed)}):",
                *(failed or ["- (none)"]),
                "",
                "Files:",
                *sources,
                "",
                "Reply with a one-line description, then a unified diff in a ```diff fenced block.",
            ]
        )

    # -- backward ------------------------------------------------------------------
    def record_verdict(self, loss: Loss) -> None:
        """Persist an epoch's verdict (what ``loss.backward()`` records) and the training document."""
        if loss.verdict is not None and self.persist:
            doc = VerdictDoc(
                verdict_id=self.verdict_id(loss),
                training_id=self.training_id,
                epoch=loss.epoch,
                baseline_run=loss.baseline_run,
                candidate_run=loss.candidate_run,
                baseline_sha=loss.baseline_sha,
                candidate_sha=loss.candidate_sha,
                verdict=loss.verdict.to_dict(),
            )
            self.store.put_doc(
                doc.verdict_id,
                "verdict",
                doc.to_dict(),
                name=self.config.name,
                harness_sha=loss.candidate_sha or "",
                config_digest=self.spec_digest,
            )
        self._save()

    def chain(self) -> list[str]:
        return [self.initial_sha] + [
            lo.candidate_sha for lo in self.losses if lo.promoted_or_none and lo.candidate_sha
        ]

    def summary(self) -> dict[str, Any]:
        epochs = [lo.to_dict() for lo in self.losses] + self.recorded[len(self.losses) :]
        return {
            "training_id": self.training_id,
            "kind": "training",
            "name": self.config.name,
            "spec_digest": self.spec_digest,
            "harness_repo": str(self.harness.path),
            "branch": self.harness.branch,
            "initial_sha": self.initial_sha,
            "final_baseline": self.harness.resolve(),
            "chain": self.chain(),
            "epochs": epochs,
            "runs": sorted({r for e in epochs for r in (e["baseline_run"], e["candidate_run"]) if r}),
            "verdicts": [e["verdict_id"] for e in epochs if e.get("verdict_id")],
            "cassettes": [e["proposal_cassette"] for e in epochs if e.get("proposal_cassette")],
            "trees": sorted({s for e in epochs for s in (e["baseline_sha"], e["candidate_sha"]) if s}),
            "estimator": self.estimator.identity(),
            "criterion": {"name": self.criterion.name, "params": self.criterion.params()},
            "optimizer": {"name": self.optimizer.name, "params": self.optimizer.params()},
            "model": model_id(self.config.model).__dict__,
            "config": self.config.model_dump(mode="json"),
            "config_base_dir": str(self.config.base_dir),
        }

    @staticmethod
    def stored_estimator(store: Store, doc: dict[str, Any]) -> Estimator | None:
        """A recorded training's patch queue, read from the store (not from the diff files,
        which may be elsewhere or gone); ``None`` for other estimators and older trainings."""
        queue = doc.get("patch_queue")
        if not queue:
            return None
        return PatchQueue(
            [store.get_blob(h).decode("utf-8") for h in queue["diffs"]], queue.get("descriptions")
        )

    def _save(self) -> None:
        if not self.persist:
            return
        doc = self.summary()
        if getattr(self, "_bundle", None) is None:
            self._bundle = self.store.put_blob(gitops.git_bundle(self.harness.repo, self.initial_sha))
        bundle = self._bundle
        doc["initial_bundle"] = bundle
        doc["blobs"] = [bundle]
        if isinstance(
            self.estimator, PatchQueue
        ):  # the diff texts travel with the training (replay, bundles)
            if getattr(self, "_diffs", None) is None:
                self._diffs = [self.store.put_blob(d.encode("utf-8")) for d in self.estimator.diffs]
            doc["patch_queue"] = {"diffs": self._diffs, "descriptions": list(self.estimator.descriptions)}
            doc["blobs"] = [bundle, *self._diffs]
        self.store.put_doc(
            self.training_id,
            "training",
            doc,
            name=self.config.name,
            harness_sha=self.initial_sha,
            model=self.config.model.name,
            endpoint=model_id(self.config.model).endpoint,
            config_digest=self.spec_digest,
        )
