"""What a candidate must pass before its panel is measured, and when a training stops.

- **Smoke run** (``train.smoke: {tasks: 1, seeds: 1}``): the training panel's first tasks ×
  first seeds, measured for the candidate like any run (its episodes are the panel's own, so
  they are reused when the panel runs). An episode whose harness raised (outcome ``crash``)
  skips the epoch: ``smoke: crashed on hello-file#0: RuntimeError: …``; no panel run is paid.
- **Candidate tests** (``train.candidate_tests: "CMD"``): the harness repository's own tests,
  run by ``sh -c`` in a clean checkout of the candidate (a detached worktree), with the
  determinism pins and no credential in its environment, for at most ``TESTS_TIMEOUT`` s. A
  non-zero exit skips the epoch with its last output line. The result is recorded in the epoch
  (``candidate_tests``: command, exit code, output tail): a resume or a replay reads it and runs
  nothing (a replay needs no more than its cassettes).
- **Circuit breaker** (``train.max_consecutive_skips``, default 2): after that many skipped
  epochs in a row the training stops with one line naming them; the limit is no part of the
  training's identity, so running again with a higher one resumes it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

import git

from replaykit.cassette.backend import EpisodeStore
from replaykit.cassette.outcomes import classify_episode
from replaykit.core.determinism import pinned_environ
from replaykit.core.glossary import epoch_names
from replaykit.core.run_doc import RunDoc
from replaykit.core.training_doc import TestsRecord
from replaykit.train import gitops

TESTS_TIMEOUT = 600.0
TAIL = 2000  # characters of the tests' output kept


TestsResult = TestsRecord  # what an epoch records of its candidate's tests


def smoke_failure(store: EpisodeStore, run: RunDoc) -> str | None:
    """Why the smoke run fails the candidate (an episode whose harness raised), or None."""
    for e in run.episodes:
        found = classify_episode(store.get_episode(e.cassette_id))
        if found.outcome == "crash":
            why = (found.error or "the harness raised").splitlines()[0][:300]
            return f"smoke: crashed on {e.task_id}#{e.seed}: {why}"
    return None


def run_candidate_tests(repo: git.Repo, sha: str, command: str) -> TestsResult:
    """``command`` in a clean checkout of ``sha`` (see the module doc)."""
    with gitops.worktree(repo, sha) as checkout:
        try:
            proc = subprocess.run(
                ["sh", "-c", command],
                cwd=checkout,
                env=pinned_environ(),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=TESTS_TIMEOUT,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"") + (exc.stderr or b"") if isinstance(exc.stdout, bytes) else ""
            return {"command": command, "exit_code": -1, "output": str(out)[-TAIL:]}
    return {"command": command, "exit_code": proc.returncode, "output": (proc.stdout + proc.stderr)[-TAIL:]}


def tests_failure(result: TestsResult) -> str | None:
    if result["exit_code"] == 0:
        return None
    last = next((line for line in reversed(result["output"].splitlines()) if line.strip()), "")
    how = (
        f"timed out after {TESTS_TIMEOUT:g} s"
        if result["exit_code"] == -1
        else f"exited {result['exit_code']}"
    )
    return f"candidate tests: `{result['command']}` {how}" + (f": {last.strip()[:200]}" if last else "")


def tripped(skips: Sequence[tuple[int, str]], limit: int, total: int) -> str | None:
    """The circuit breaker's line when the last ``limit`` epochs were all skipped, else None;
    ``skips``: (epoch, reason) of the trailing skipped epochs, oldest first."""
    if len(skips) < limit:
        return None
    last = skips[-limit:]
    return (
        f"circuit breaker: {limit} consecutive skipped epochs ({epoch_names(e for e, _ in last)}), the"
        f" last: {last[-1][1][:200]}; stopped after epoch {last[-1][0]} of {total}"
        f" (train.max_consecutive_skips: {limit}; fix the proposer or raise the limit, then run again: it resumes)"
    )
