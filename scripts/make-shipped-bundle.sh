#!/usr/bin/env bash
# Regenerate cassettes/quickstart-training.tar.gz: the training `replaykit train configs/quickstart.yaml`
# makes on a fresh clone (built-in reference model, local environment), recorded by this version of
# replaykit, as a bundle; then the README's sample outputs, which show that training's ids.
# Run it when tests/test_shipped_bundle.py says the quickstart makes another training id (a change of
# the template, the panel, the config digest or the cassette keys), and after any change of the
# cassette or bundle format (bump the version and add a migration first: cassettes/README.md).
# Takes about a minute (the training is recorded live on the built-in server).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# a fresh clone's layout, so the config's ../ paths are as written (the panel enters the training id)
cp -r configs envs "$tmp"/
echo "make-shipped-bundle: recording the quickstart training in $tmp (about a minute)" >&2
training=$(cd "$tmp" && replaykit train configs/quickstart.yaml --json |
  python -c "import json, sys; print(json.load(sys.stdin)['training_id'])")
replaykit cassettes export "$training" -o cassettes/quickstart-training.tar.gz --store "$tmp/cassettes" --json >/dev/null
# what a fresh clone imports is that training
check=$(replaykit cassettes import cassettes/quickstart-training.tar.gz --store "$tmp/check" --json |
  python -c "import json, sys; print(json.load(sys.stdin)['root']['id'])")
[ "$check" = "$training" ] || { echo "make-shipped-bundle: the bundle holds $check, not $training" >&2; exit 1; }
echo "make-shipped-bundle: writing the README's sample outputs (tests/test_docs.py)" >&2
REPLAYKIT_WRITE_DOCS=1 python -m pytest -q -n 0 -p no:cacheprovider tests/test_docs.py -k sample_outputs >&2
echo "cassettes/quickstart-training.tar.gz: training $training"
