"""A scratch clone of a recorded training's harness, for offline audits.

The clone comes from the git bundle stored with the training (never from, and
never into, the user's harness repository). In it the recorded candidate commits
are rebuilt from the stored trees (same message and date derivation as the
trainer, so the same SHAs), each recorded proposal becomes a diff, and a diff can
be re-applied to another baseline as a deterministic candidate commit.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import git

from replaykit.cassette.backend import RunStore
from replaykit.core.errors import HarnessError, TrainError
from replaykit.core.training_doc import TrainingDoc
from replaykit.episodes.harness import load_solve
from replaykit.train import gitops


@dataclass(frozen=True)
class Proposal:
    """One recorded epoch's proposal: its diff against the recorded baseline, or why there is none."""

    epoch: int
    description: str
    diff: str | None
    reason: str | None = None  # why there is no diff (the recorded skip)


def commit_message(epoch: int, description: str) -> str:
    return f"epoch {epoch}: {description}"[:200]  # as the trainer writes it


class Scratch:
    """``with Scratch(store, training_doc) as s:`` a temporary clone, removed afterwards."""

    def __init__(self, store: RunStore, doc: TrainingDoc, entry: str, surface: list[str]) -> None:
        self.store, self.doc, self.entry, self.surface = store, doc, entry, surface
        self.tmp = Path(tempfile.mkdtemp(prefix="replaykit-audit-"))
        self.repo: git.Repo | None = None

    def __enter__(self) -> "Scratch":
        try:
            self.repo = gitops.clone_bundle(
                self.store.get_blob(self.doc.initial_bundle or ""),
                self.tmp / "harness",
                self.doc.initial_sha,
                self.doc.branch,
            )
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def git(self) -> git.Repo:
        assert self.repo is not None
        return self.repo

    def has_commit(self, sha: str) -> bool:
        try:
            self.git.git.cat_file("-e", f"{sha}^{{commit}}")
            return True
        except git.GitCommandError:
            return False

    # -- the recorded proposals ---------------------------------------------------------
    def _rebuild(self, epoch: int, base: str, sha: str, description: str) -> bool:
        """Rebuild recorded candidate ``sha`` (child of ``base``) from its stored tree; True if the SHA matches."""
        if self.has_commit(sha):
            return True
        if not self.has_commit(base) or not self.store.has_tree(sha):
            return False
        with gitops.worktree(self.git, base) as wd:
            for path in wd.iterdir():
                if path.name != ".git":
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
            for rel, (mode, data) in self.store.get_tree(sha).items():
                dest = wd / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
                dest.chmod(0o755 if mode & 0o111 else 0o644)
            rebuilt = gitops.commit_candidate(wd, commit_message(epoch, description), epoch)
        return rebuilt == sha

    def diff(self, base: str, sha: str) -> str:
        return subprocess.run(
            ["git", "diff", "--binary", "--full-index", base, sha],
            cwd=self.git.working_dir,
            capture_output=True,
            check=True,
        ).stdout.decode("utf-8", "surrogateescape")

    def proposals(self) -> list[Proposal]:
        """Every recorded epoch's proposal, rebuilding the recorded candidate commits in order."""
        out = []
        for e in self.doc.epochs:
            epoch, cand, desc = e.epoch, e.candidate_sha, e.description
            if cand and self._rebuild(epoch, e.baseline_sha, cand, desc):
                out.append(Proposal(epoch, desc, self.diff(e.baseline_sha, cand)))
            elif cand:
                out.append(
                    Proposal(
                        epoch,
                        desc,
                        None,
                        f"candidate {cand[:10]} is not in the stored trees ({e.skipped or 'no tree'})",
                    )
                )
            else:
                out.append(Proposal(epoch, desc, None, e.skipped or "no candidate"))
        return out

    # -- re-applying a proposal elsewhere ------------------------------------------------
    def apply(self, parent: str, proposal: Proposal) -> tuple[str | None, str | None]:
        """Commit ``proposal`` on ``parent`` as the trainer would → (candidate SHA or None, skip reason or None)."""
        if proposal.diff is None:
            return None, f"recorded proposal has no change: {proposal.reason}"
        with gitops.worktree(self.git, parent) as wd:
            try:
                gitops.apply_diff(wd, proposal.diff)
            except TrainError as exc:
                return None, str(exc)
            changed = gitops.changed_paths(wd)
            if not changed:
                return None, "empty diff: the estimator changed nothing"
            sha = gitops.commit_candidate(
                wd, commit_message(proposal.epoch, proposal.description), proposal.epoch
            )
            outside = [p for p in changed if not any(fnmatch.fnmatch(p, pat) for pat in self.surface)]
            if outside:
                return (
                    sha,
                    f"edits outside the patch surface ({', '.join(self.surface)}): {', '.join(outside)}",
                )
            try:
                load_solve(wd, self.entry)
            except HarnessError as exc:
                return sha, f"harness no longer imports: {exc}"
        return sha, None
