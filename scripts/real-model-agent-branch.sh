#!/usr/bin/env bash
# Make the outside-agent arm of the real-model chart: branch `agent` of the real-model harness repo,
# the initial harness's commit with harness.py replaced by configs/real-model/agent/harness.py
# (mini-swe-agent 2.4.6 as a harness; `pip install mini-swe-agent==2.4.6` to run it). Fixed author
# and dates, so the branch has the same SHA on every machine (8013402 over the template's 503b034).
#   bash scripts/real-model-agent-branch.sh [HARNESS_REPO]   # default: .replaykit/harnesses/real-model
#   replaykit compare configs/real-model.yaml --models smollm2 --harness untrained=503b034d02,trained=main,agent=agent
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
repo="${1:-$root/.replaykit/harnesses/real-model}"
[ -d "$repo/.git" ] || { echo "real-model-agent-branch: no harness repo at $repo; run 'replaykit run configs/real-model.yaml' (or train) first" >&2; exit 1; }
initial="$(git -C "$repo" rev-list --max-parents=0 HEAD | tail -n 1)"
tmp="$(mktemp -d)"
trap 'git -C "$repo" worktree remove --force "$tmp" 2>/dev/null || rm -rf "$tmp"' EXIT
git -C "$repo" worktree add -q --detach "$tmp" "$initial"
cp "$root/configs/real-model/agent/harness.py" "$tmp/harness.py"
export GIT_AUTHOR_NAME=replaykit GIT_AUTHOR_EMAIL=replaykit@localhost GIT_COMMITTER_NAME=replaykit \
  GIT_COMMITTER_EMAIL=replaykit@localhost GIT_AUTHOR_DATE="1700000000 +0000" GIT_COMMITTER_DATE="1700000000 +0000"
git -C "$tmp" commit -q -am "the outside agent: mini-swe-agent 2.4.6 (mini_textbased.yaml) over the recorded client and the task's container"
sha="$(git -C "$tmp" rev-parse HEAD)"
git -C "$repo" branch -f agent "$sha"
echo "branch agent of $repo: $sha"
