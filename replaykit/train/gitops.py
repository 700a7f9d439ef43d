"""Git moves of a training: candidate worktrees and commits, refs, fast-forwards.

Candidate commits get author, committer and dates derived from the training
(``SOURCE_DATE_EPOCH`` + epoch), so the same change on the same baseline has the
same SHA everywhere. The baseline branch only ever moves by fast-forward.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import git

from replaykit.core.determinism import ENV_PINS, SOURCE_DATE_EPOCH
from replaykit.core.errors import StoreCorrupt, TrainError
from replaykit.core.stale import WORKTREE_PREFIX
from replaykit.episodes.harness import commit_all

REF_ROOT = "refs/replaykit"


def candidate_ref(training_id: str, epoch: int) -> str:
    return f"{REF_ROOT}/candidates/{training_id}/epoch-{epoch:03d}"


def verdict_ref(training_id: str, epoch: int, accepted: bool) -> str:
    return f"{REF_ROOT}/{'accepted' if accepted else 'rejected'}/{training_id}/epoch-{epoch:03d}"


@contextlib.contextmanager
def worktree(repo: git.Repo, sha: str) -> Iterator[Path]:
    """A detached worktree of ``sha`` in a temporary folder, removed afterwards."""
    path = Path(
        tempfile.mkdtemp(prefix=f"{WORKTREE_PREFIX}{os.getpid()}-")
    )  # the pid: a killed owner's is cleaned later
    shutil.rmtree(path)
    repo.git.worktree("add", "--detach", str(path), sha)
    try:
        yield path
    finally:
        with contextlib.suppress(git.GitCommandError):
            repo.git.worktree("remove", "--force", str(path))
        shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(git.GitCommandError):
            repo.git.worktree("prune")


def changed_paths(workdir: Path) -> list[str]:
    """Paths changed in a worktree (tracked and untracked), sorted."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "-z", "--untracked-files=all"],
        cwd=workdir,
        capture_output=True,
        check=True,
    ).stdout.decode()
    paths = set()
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        if entry:
            status, path = entry[:2], entry[3:]
            paths.add(path)
            if status[0] in "RC":  # rename/copy: the next entry is the source path
                i += 1
                paths.add(entries[i])
        i += 1
    return sorted(paths)


def apply_diff(workdir: Path, diff: str) -> None:
    proc = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "-"], cwd=workdir, input=diff.encode(), capture_output=True
    )
    if proc.returncode != 0:
        raise TrainError(
            f"patch does not apply: {proc.stderr.decode().strip().splitlines()[0] if proc.stderr else 'git apply failed'}"
        )


def commit_candidate(workdir: Path, message: str, epoch: int) -> str:
    repo = git.Repo(workdir)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", ENV_PINS["GIT_AUTHOR_NAME"])
        cw.set_value("user", "email", ENV_PINS["GIT_AUTHOR_EMAIL"])
    return commit_all(repo, message, date=f"{SOURCE_DATE_EPOCH + epoch + 1} +0000")


def set_ref(repo: git.Repo, ref: str, sha: str) -> None:
    repo.git.update_ref(ref, sha)


def is_ancestor(repo: git.Repo, older: str, newer: str) -> bool:
    try:
        repo.git.merge_base("--is-ancestor", older, newer)
        return True
    except git.GitCommandError:
        return False


def fast_forward(repo: git.Repo, branch: str, sha: str) -> None:
    """Move ``branch`` to ``sha`` only if that is a fast-forward (no-op if already contained)."""
    head = repo.commit(branch).hexsha
    if head == sha or is_ancestor(repo, sha, head):
        return
    if not is_ancestor(repo, head, sha):
        raise TrainError(f"refusing to move {branch} from {head[:10]} to {sha[:10]}: not a fast-forward")
    checked_out = not repo.head.is_detached and repo.active_branch.name == branch
    if checked_out:
        repo.git.merge("--ff-only", sha)
    else:
        repo.git.update_ref(f"refs/heads/{branch}", sha, head)


def git_bundle(repo: git.Repo, sha: str) -> bytes:
    """A git bundle holding ``sha`` and its history (stored so replay needs no original repo)."""
    tmp = Path(tempfile.mkdtemp(prefix="replaykit-bundle-"))
    ref = f"{REF_ROOT}/bundle-tmp"
    try:
        repo.git.update_ref(ref, sha)
        repo.git.bundle("create", str(tmp / "h.bundle"), ref)
        return (tmp / "h.bundle").read_bytes()
    finally:
        with contextlib.suppress(git.GitCommandError):
            repo.git.update_ref("-d", ref)
        shutil.rmtree(tmp, ignore_errors=True)


def clone_bundle(data: bytes, dest: Path, sha: str, branch: str, where: str = "") -> git.Repo:
    """Clone a stored harness bundle (checked with ``git bundle verify`` first) at ``sha``;
    a bundle that does not verify or does not hold ``sha`` is ``store corrupt``, one line."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest.parent / f"{dest.name}.bundle"
    path.write_bytes(data)
    repo = git.Repo.init(dest, initial_branch=branch)
    what = f"the git bundle of the initial baseline{f' of {where}' if where else ''}"
    try:
        repo.git.bundle("verify", "--quiet", str(path))
    except git.GitCommandError as exc:
        detail = next((ln.strip() for ln in str(exc.stderr).splitlines() if ln.strip()), "")
        raise StoreCorrupt(f"{what} does not verify (git bundle verify: {detail[:120]})") from None
    try:
        repo.git.fetch("--update-head-ok", str(path), f"{REF_ROOT}/bundle-tmp:refs/heads/{branch}")
        repo.git.reset("--hard", sha)
        repo.git.checkout(branch)
    except git.GitCommandError:
        raise StoreCorrupt(f"{what} does not hold commit {sha[:10]}") from None
    if repo.head.commit.hexsha != sha:
        raise StoreCorrupt(f"{what} does not hold commit {sha[:10]}")
    return repo
