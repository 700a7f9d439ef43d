#!/usr/bin/env bash
# The README's test command: installs everything the tests need, then runs them all.
#   bash scripts/test.sh [pytest args...]
# pytest runs on REPLAYKIT_TEST_WORKERS xdist workers (default 2: CI's two cores; `auto`
# for one per core, 0 to run serially), whole test modules (or xdist_group groups) per
# worker, longest first (tests/parallel.py). Later pytest args win: `-n 0` debugs serially.
# Installs: replaykit with its dev extra (pip). Later steps (Docker engine, base
# image, Codex CLI) are added by scripts/setup-*.sh when present.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[dev]'

for setup in scripts/setup-*.sh; do
  [ -f "$setup" ] || continue
  echo "== $setup"
  bash "$setup"
done

echo "== ruff check, ruff format --check"
python3 -m ruff check replaykit tests
python3 -m ruff format --check --quiet .
echo "== mypy"
python3 -m mypy replaykit
python3 -m mypy --explicit-package-bases tests
echo "== import cycles and layers"
python3 scripts/check_imports.py

python3 -m pytest -q -n "${REPLAYKIT_TEST_WORKERS:-2}" --dist loadgroup "$@"
