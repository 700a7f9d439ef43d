#!/usr/bin/env bash
# Re-make cassettes/real-model-training.tar.gz and the README's real-model chart: configs/real-model.yaml's
# training recorded live on SmolLM2-135M-Instruct (llama.cpp's llama-server, Docker), then
# `replaykit transfer` of it on the same panel × {smollm2, tiny} (untrained vs trained: the smollm2
# cells are the training's own runs, the tiny cells recorded on a second engine), the training exported
# with the transfer document that names it, and docs/real-model-compare.svg/.png redrawn from that
# bundle by `replaykit reproduce`.
#   bash scripts/setup-llama-server.sh && bash scripts/setup-docker.sh  # once
#   bash scripts/make-real-model-bundle.sh [WORK]   # WORK: a folder to record in (kept; run again, it resumes)
# A new recording is another sample, not these bytes: rewrite the README's figures (section "A live
# training on a real model") from what it prints. On 2 shared cores under load ~15 the training took
# about 14 minutes (74 SmolLM2 calls) and the transfer's tiny cells 48 calls more.
# Both engines listen on free ports (base_url enters no key); progress is drawn on the terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mkdir -p .replaykit
exec 9>.replaykit/make-real-model-bundle.lock
flock -n 9 || { echo "make-real-model-bundle: already running (.replaykit/make-real-model-bundle.lock)" >&2; exit 1; }

if [ $# -ge 1 ]; then
  work=$(mkdir -p "$1" && cd "$1" && pwd)
  keep=1
else
  work=$(mktemp -d)
  keep=0
fi
engines=()
cleanup() {
  for pid in "${engines[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$keep" = 0 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# a fresh clone's layout, so the config's ../ paths are as written
[ -d "$work/configs" ] || cp -r configs envs "$work"/

start_engine() {  # MODEL: started in the background (it runs until this script ends)
  rm -f "$work/engine-$1.json"
  replaykit engine start --model "$1" --port 0 --json >"$work/engine-$1.json" 2>"$work/engine-$1.err" &
  engines+=("$!")
}
base_url() {  # MODEL -> its base URL, once it answers
  for _ in $(seq 600); do
    if python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['base_url'])" "$work/engine-$1.json" 2>/dev/null; then
      return 0
    fi
    sleep 1
  done
  echo "make-real-model-bundle: the $1 engine did not start: $(cat "$work/engine-$1.err")" >&2
  return 1
}
start_engine smollm2
start_engine tiny
smollm2=$(base_url smollm2)
tiny=$(base_url tiny)
sed -i -E "s#^  base_url: .*#  base_url: $smollm2#" "$work/configs/real-model.yaml"
echo "make-real-model-bundle: smollm2 at $smollm2, tiny at $tiny; recording in $work" >&2

cd "$work"
replaykit train configs/real-model.yaml  # 3 epochs, progress drawn; rerun: resumes what is recorded
training=$(replaykit train configs/real-model.yaml --json |  # every epoch reused: its id
  python3 -c "import json, sys; print(json.load(sys.stdin)['training_id'])")
transfer=(transfer "$training" --config configs/real-model.yaml --models smollm2,tiny
  --endpoint "tiny=$tiny")
replaykit "${transfer[@]}"  # the table; the training's own cells reused, the others recorded
transfer_id=$(replaykit "${transfer[@]}" --json | python3 -c "import json, sys; print(json.load(sys.stdin)['transfer_id'])")

cd "$root"
replaykit cassettes export "$training" -o cassettes/real-model-training.tar.gz --store "$work/cassettes" --json >/dev/null
# what a fresh clone gets: that training, and the transfer that names it
check=$(replaykit cassettes import cassettes/real-model-training.tar.gz --store "$work/check" --json |
  python3 -c "import json, sys; print(json.load(sys.stdin)['root']['id'])")
[ "$check" = "$training" ] || { echo "make-real-model-bundle: the bundle holds $check, not $training" >&2; exit 1; }
rm -rf "$work/check"
replaykit reproduce cassettes/real-model-training.tar.gz \
  --chart transfer=docs/real-model-compare.svg --chart transfer=docs/real-model-compare.png
echo "cassettes/real-model-training.tar.gz: training $training, transfer $transfer_id"
