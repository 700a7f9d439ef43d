#!/usr/bin/env bash
# Installs the named agents replaykit ships (replaykit/agents/), each in its own venv, so none of
# their dependencies (litellm, pandas, ...) is one of replaykit's, under ~/.cache/replaykit/agents/:
#   mini-swe-agent-VERSION/venv/bin/mini     mini-swe-agent's CLI
#   bin/mini                                 a link to it: the folder to put on $REPLAYKIT_AGENTS_PATH
# Every dependency of a venv is pinned by scripts/constraints-agents.txt (refreshed by
# scripts/lock.sh). Idempotent: a warm run (that very set already there) takes well under a second.
# Run by scripts/test.sh, which exports REPLAYKIT_AGENTS_PATH; outside it replaykit looks in
# $REPLAYKIT_AGENTS_HOME/bin (~/.cache/replaykit/agents/bin) when REPLAYKIT_AGENTS_PATH is unset.
set -euo pipefail
cd "$(dirname "$0")/.."

MSWEA_VERSION="${REPLAYKIT_MSWEA_VERSION:-2.4.6}"
CACHE="${REPLAYKIT_AGENTS_HOME:-$HOME/.cache/replaykit/agents}"
CONSTRAINTS="$PWD/scripts/constraints-agents.txt"
VENV="$CACHE/mini-swe-agent-$MSWEA_VERSION/venv"
STAMP="$CACHE/mini-swe-agent-$MSWEA_VERSION/installed-$(sha256sum "$CONSTRAINTS" | cut -c1-16)"

installed() {
  [ -f "$STAMP" ] && [ -x "$VENV/bin/mini" ] &&
    "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mini-swe-agent') != '$MSWEA_VERSION')" 2>/dev/null
}
if ! installed; then
  PY="$(command -v python3.11 || command -v python3)"
  echo "agents: installing mini-swe-agent==$MSWEA_VERSION with $PY into $VENV (pinned: $CONSTRAINTS)"
  rm -rf "$VENV" "$CACHE/mini-swe-agent-$MSWEA_VERSION"/installed-*
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
  echo "agents: pip install (litellm and its dependencies: a minute or two on a cold cache)"
  if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --progress-bar off \
      -c "$CONSTRAINTS" "mini-swe-agent==$MSWEA_VERSION" 2>&1 |
      { grep -v "is ignored: it is neither a file nor a directory" || true; }; then
    echo "setup-agents: pip install mini-swe-agent==$MSWEA_VERSION failed (output above)" >&2
    exit 1
  fi
  touch "$STAMP"
fi
mkdir -p "$CACHE/bin"
ln -sfn "$VENV/bin/mini" "$CACHE/bin/mini"
echo "agents: mini-swe-agent $("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('mini-swe-agent'))") at $CACHE/bin/mini (REPLAYKIT_AGENTS_PATH=$CACHE/bin)"
