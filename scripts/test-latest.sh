#!/usr/bin/env bash
# Not a gate: does the project still pass with today's newest releases? Runs the README's test
# command in a new virtualenv with no constraints (pip resolves the newest of everything
# pyproject.toml allows), then prints what differs from scripts/constraints.txt. A failure
# here is a warning that the next `bash scripts/lock.sh` needs a fix first.
#   bash scripts/test-latest.sh [pytest args...]     e.g. -m unit
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$VENV")"' EXIT
python3 -m venv "$VENV"
status=0
env -u VIRTUAL_ENV REPLAYKIT_GATE_VENV="$VENV" REPLAYKIT_CONSTRAINTS="" bash scripts/test.sh "$@" || status=$?
echo "== newest releases that differ from scripts/constraints.txt"
"$VENV/bin/python" - <<'PY'
from importlib.metadata import distributions
import re


def canonicalize_name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


pins = {}
for line in open("scripts/constraints.txt"):
    if "==" in line and not line.startswith("#"):
        name, version = line.strip().split("==", 1)
        pins[canonicalize_name(name)] = version
for dist in sorted(distributions(), key=lambda d: canonicalize_name(d.metadata["Name"])):
    name = canonicalize_name(dist.metadata["Name"])
    if name in pins and pins[name] != dist.version:
        print(f"  {name}: pinned {pins[name]}, newest {dist.version}")
PY
if [ "$status" = 0 ]; then echo "test-latest: the newest releases pass"; else echo "test-latest: FAILED with the newest releases (exit $status)"; fi
exit "$status"
