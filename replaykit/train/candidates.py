"""An epoch's candidate: the estimator's edit of the baseline as one child commit, then the
gates it must pass before its panel is measured (a skipped epoch says which it failed).

``Candidates(state, measure).propose(loss, train_run)`` asks the estimator in a worktree of the
baseline with the brief of the training panel (``brief.py``; the proposer never sees another
panel) and commits the edit reproducibly; ``gate(loss, sha)`` checks the patch surface, the
import of the harness, and (format 2) the smoke run and candidate tests (``gates.py``).
"""

from __future__ import annotations

import fnmatch
from typing import Protocol

from replaykit.core.errors import HarnessError, TrainError
from replaykit.core.modes import RecordMode
from replaykit.core.run_doc import RunDoc
from replaykit.episodes.harness import load_solve
from replaykit.train import gates, gitops
from replaykit.train.brief import training_brief
from replaykit.train.loss import Loss
from replaykit.train.proposal import proposal_session
from replaykit.train.state import TrainingState
from replaykit.train.workspace import build_workspace
from replaykit.train.workspace_tree import Workspace, reads_workspace, recorded_tasks


class Measure(Protocol):
    """The trainer's measure of a harness SHA (``Trainer._measure``)."""

    def __call__(
        self, sha: str, label: str, baseline_sha: str | None = None, panel: str = ..., smoke: bool = ...
    ) -> RunDoc: ...


class Candidates:
    """Proposes and gates one training's candidates (see the module doc)."""

    def __init__(self, state: TrainingState, measure: Measure) -> None:
        self.state, self.measure = state, measure
        self.harness, self.store, self.config = state.harness, state.store, state.config
        self.train_cfg, self.persist, self.progress = state.train_cfg, state.persist, state.progress

    def propose(self, loss: Loss, train_run: RunDoc) -> str | None:
        """The estimator's edit of the baseline as one candidate commit (its SHA), or None with
        ``loss.skipped`` saying why there is none."""
        epoch, baseline_sha = loss.epoch, loss.baseline_sha
        brief = self.brief(epoch, baseline_sha, train_run)
        workspace = self.workspace(epoch, baseline_sha, train_run)
        loss.workspace_digest = workspace.digest if workspace else None
        estimator = self.state.estimator
        with gitops.worktree(self.harness.repo, baseline_sha) as workdir:
            with proposal_session(self.state, epoch, baseline_sha, brief, workspace) as (
                session,
                cassette_id,
            ):
                try:
                    if workspace is None:
                        loss.description = estimator.edit(workdir, brief, session, epoch)
                    else:  # an estimator that reads a workspace (``workspace_tree.reads_workspace``)
                        loss.description = estimator.edit(workdir, brief, session, epoch, workspace=workspace)  # type: ignore[call-arg]
                except TrainError as exc:
                    loss.skipped = str(exc)
            loss.proposal_cassette = cassette_id
            if loss.skipped:
                return None
            loss.changed = gitops.changed_paths(workdir)
            if not loss.changed:
                said = loss.description.strip() if loss.description else ""
                loss.skipped = "empty diff: the estimator changed nothing" + (f" ({said})" if said else "")
                return None
            sha = gitops.commit_candidate(workdir, f"epoch {epoch}: {loss.description}"[:200], epoch)
        loss.candidate_sha = sha
        if self.persist:
            gitops.set_ref(self.harness.repo, gitops.candidate_ref(self.state.training_id, epoch), sha)
        return sha

    def gate(self, loss: Loss, sha: str) -> bool:
        """Skip the candidate (True, ``loss.skipped`` set) when it edits outside the patch
        surface, no longer imports, crashes its smoke run or fails its tests (``gates.py``)."""
        surface = self.train_cfg.patch_surface
        outside = [p for p in loss.changed if not any(fnmatch.fnmatch(p, pat) for pat in surface)]
        if outside:
            loss.skipped = f"edits outside the patch surface ({', '.join(surface)}): {', '.join(outside)}"
            return True
        files = self.harness.tree_files(sha)
        if self.persist:
            self.store.put_tree(sha, files)
        try:
            load_solve(self.store.materialise_tree(sha, files), self.config.harness.entry)
        except HarnessError as exc:
            loss.skipped = f"harness no longer imports: {exc}"
            return True
        if self.state.format < 2:
            return False
        if self.train_cfg.smoke.tasks > 0:
            smoke = self.measure(sha, f"epoch {loss.epoch}: smoke", loss.baseline_sha, smoke=True)
            loss.smoke = list(smoke.cassettes)
            loss.skipped = gates.smoke_failure(self.store, smoke)
        if not loss.skipped and self.train_cfg.candidate_tests:
            loss.candidate_tests = self._tests(loss.epoch, sha, self.train_cfg.candidate_tests)
            loss.skipped = gates.tests_failure(loss.candidate_tests)
        return loss.skipped is not None

    def _tests(self, epoch: int, sha: str, command: str) -> gates.TestsResult:
        """The candidate's tests: run now, or (resuming, replaying) as its epoch recorded them."""
        rec = self.state.recorded[epoch] if epoch < len(self.state.recorded) else None
        found = rec.candidate_tests if rec and rec.candidate_sha == sha else None
        if found is not None and found["command"] == command:
            return found
        if self.state.record_mode is RecordMode.NONE or not self.persist:
            raise TrainError(
                f"epoch {epoch}: no recorded result of the candidate tests (`{command}`) of {sha[:10]};"
                " a replay runs nothing: record the training first"
            )
        result = gates.run_candidate_tests(self.harness.repo, sha, command)
        self.progress(
            "note", {"message": f"epoch {epoch}: candidate tests on {sha[:10]}: exit {result['exit_code']}"}
        )
        return result

    def workspace(self, epoch: int, baseline_sha: str, train_run: RunDoc) -> Workspace | None:
        """The proposer's workspace of ``epoch`` (``workspace.py``), or None: a format-1 training,
        an estimator that reads none, or a recorded epoch whose proposal read none (its key stays).
        A recorded epoch's task files come from its proposal's metadata (a replay needs no task folder)."""
        rec = self.state.recorded[epoch] if epoch < len(self.state.recorded) else None
        if rec is not None:
            if not rec.workspace_digest:
                return None
        elif self.state.format < 2 or not reads_workspace(self.state.estimator):
            return None
        tasks = None
        cassette = rec.proposal_cassette if rec else None
        if cassette and self.store.has(cassette):
            tasks = recorded_tasks(self.store.get_episode(cassette).meta)
        return build_workspace(self.state, baseline_sha, train_run, tasks)

    def brief(self, epoch: int, baseline_sha: str, baseline: RunDoc) -> str:
        """What the proposer reads for ``epoch`` (:mod:`replaykit.train.brief`)."""
        return training_brief(
            epoch=epoch,
            training_id=self.state.training_id,
            patch_surface=self.train_cfg.patch_surface,
            baseline_sha=baseline_sha,
            baseline=baseline,
            tried=self.state.losses,
            store=self.store,
            files=self.harness.tree_files(baseline_sha),
        )
