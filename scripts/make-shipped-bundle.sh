#!/usr/bin/env bash
# Regenerate cassettes/quickstart-training.tar.gz: the quickstart training (configs/quickstart.yaml,
# built-in reference model, local environment) recorded by this version of replaykit, as a bundle.
# Run it after any change of cassette keys or of the cassette/bundle format (and bump the version).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
cfg=configs/.shipped-quickstart.yaml
trap 'rm -rf "$tmp" "$cfg"' EXIT
python - "$tmp" "$cfg" <<'PY'
import sys
from pathlib import Path

import yaml

tmp, cfg = Path(sys.argv[1]), Path(sys.argv[2])
data = yaml.safe_load(Path("configs/quickstart.yaml").read_text())
data["store"] = str(tmp / "store")
data["harness"]["repo"] = str(tmp / "harness")
cfg.write_text(yaml.safe_dump(data, sort_keys=False))
PY
training=$(replaykit train "$cfg" --json | python -c "import json, sys; print(json.load(sys.stdin)['training_id'])")
replaykit cassettes export "$training" -o cassettes/quickstart-training.tar.gz --store "$tmp/store" --json >/dev/null
echo "cassettes/quickstart-training.tar.gz: training $training"
