"""The training brief: the text a proposer reads before it edits the baseline.

It names the epoch, the patch surface and the baseline's score, lists the proposals
already tried (with their decisions) and each failed episode's last command, and
quotes every file of the patch surface. The brief's digest keys the proposal
cassette, so the same brief replays the same proposal.
"""

from __future__ import annotations

import fnmatch
from typing import Mapping, Sequence

from replaykit.cassette.backend import EpisodeStore
from replaykit.cassette.events import EnvEvent
from replaykit.core.run_doc import RunDoc
from replaykit.train.loss import Loss


def failed_episode_lines(store: EpisodeStore, baseline: RunDoc) -> list[str]:
    """One line per failed episode of ``baseline``: its last command, exit code and output line."""
    failed = []
    for e in baseline.episodes:
        if e.passed:
            continue
        envs = [ev for ev in store.get_episode(e.cassette_id).events if isinstance(ev, EnvEvent)]
        if envs:
            last = envs[-1]
            tail = (last.observation.stderr or last.observation.stdout).strip().splitlines()[-1:] or [""]
            failed.append(
                f"- {e.task_id}#{e.seed}: last command `{last.action}` exit {last.observation.exit_code}: {tail[0][:160]}"
            )
        else:
            failed.append(f"- {e.task_id}#{e.seed}: no command was run")
    return failed


def training_brief(
    *,
    epoch: int,
    training_id: str,
    patch_surface: Sequence[str],
    baseline_sha: str,
    baseline: RunDoc,
    tried: Sequence[Loss],
    store: EpisodeStore,
    files: Mapping[str, tuple[int, bytes]],
) -> str:
    """The brief of ``epoch``; ``files`` is the baseline's tree (path → (mode, bytes))."""
    tried_lines = [f"- epoch {lo.epoch}: {lo.description} => {lo.decision}" for lo in tried]
    failed = failed_episode_lines(store, baseline)
    sources = [
        f"=== {path} ===\n{data.decode('utf-8', 'replace')}=== end {path} ==="
        for path, (_, data) in sorted(files.items())
        if any(fnmatch.fnmatch(path, pat) for pat in patch_surface)
    ]
    return "\n".join(
        [
            f"Epoch {epoch} of training {training_id}.",
            f"Patch surface: {', '.join(patch_surface)}",
            f"Baseline {baseline_sha[:10]} solved {baseline.solved}/{baseline.total} task instances.",
            "",
            "Previously tried proposals:",
            *(tried_lines or ["- (none)"]),
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
