#!/usr/bin/env bash
# The README's test command: installs everything the tests need, then runs them all.
#   bash scripts/test.sh [pytest args...]
# Python: the active virtualenv ($VIRTUAL_ENV), else one of the gate's own, made on first use
# at $REPLAYKIT_GATE_VENV (default .venv in this checkout): a machine's other packages never
# take part. What it installs is pinned by scripts/constraints.txt (every library the gate
# runs and the tests import; refreshed by `bash scripts/lock.sh`), so a new release elsewhere
# never changes what the gate checks; `bash scripts/test-latest.sh` tries the newest ones.
# pytest runs on REPLAYKIT_TEST_WORKERS xdist workers (default 2: CI's two cores; `auto`
# for one per core, 0 to run serially), whole test modules (or xdist_group groups) per
# worker, longest first (tests/parallel.py). Later pytest args win: `-n 0` debugs serially.
# Then every scripts/setup-*.sh (Docker engine and base images, engines, Harbor, ...); the
# set-up's wall and CPU time is said again at the very end, after the tests' own.
set -euo pipefail
cd "$(dirname "$0")/.."
CONSTRAINTS="${REPLAYKIT_CONSTRAINTS-scripts/constraints.txt}"
# shellcheck source=scripts/steps.sh
source scripts/steps.sh  # step NAME: says when it starts and, as it ends, how long it took

if [ -z "${VIRTUAL_ENV:-}" ]; then
  VENV="${REPLAYKIT_GATE_VENV:-.venv}"
  if [ ! -x "$VENV/bin/python3" ]; then
    step "python3 -m venv $VENV"
    python3 -m venv "$VENV"
  fi
  export VIRTUAL_ENV="$(cd "$VENV" && pwd)"
  export PATH="$VIRTUAL_ENV/bin:$PATH"
fi
pin=()
[ -n "$CONSTRAINTS" ] && pin=(-c "$CONSTRAINTS") && CONSTRAINTS="$(realpath "$CONSTRAINTS")"
export REPLAYKIT_CONSTRAINTS="$CONSTRAINTS"  # the setup steps pin with the same file
step "pip install -e '.[dev]' ${pin[*]} into $VIRTUAL_ENV"
python3 -m pip install --quiet --disable-pip-version-check "${pin[@]}" -e '.[dev]' 2>&1 |
  { grep -v "is ignored: it is neither a file nor a directory" || true; }

for setup in scripts/setup-*.sh; do
  [ -f "$setup" ] || continue
  step "$setup"
  bash "$setup"
done
# said again at the end: a fresh machine compiles llama.cpp here once (scripts/build-llama-cpp.sh);
# with its cache, the whole set-up takes a few minutes
milestone "set-up (pip install and every scripts/setup-*.sh)"

# the named agents scripts/setup-agents.sh installed (mini-swe-agent's `mini`), for tests/agents/
export REPLAYKIT_AGENTS_PATH="${REPLAYKIT_AGENTS_PATH:-${REPLAYKIT_AGENTS_HOME:-$HOME/.cache/replaykit/agents}/bin}"

step "ruff check, ruff format --check"
python3 -m ruff check .
python3 -m ruff format --check --quiet .
step "mypy"
python3 -m mypy replaykit
python3 -m mypy --explicit-package-bases tests
step "import cycles and layers"
python3 scripts/check_imports.py

step "pytest"
python3 -m pytest -q -n "${REPLAYKIT_TEST_WORKERS:-2}" --dist loadgroup "$@"
