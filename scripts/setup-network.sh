#!/usr/bin/env bash
# The frozen network's proxy: mitmproxy 11.0 in its own virtualenv under
# ~/.cache/replaykit/mitmproxy (its pinned h11/cryptography would break the openai client's
# if installed beside replaykit), every dependency pinned by scripts/constraints-mitmproxy.txt
# (refreshed by scripts/lock.sh). Idempotent: fast when that very set is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
MITMPROXY_REQUIREMENT="mitmproxy>=11.0,<11.1"
CONSTRAINTS="$PWD/scripts/constraints-mitmproxy.txt"
VENV="${REPLAYKIT_MITMPROXY_VENV:-$HOME/.cache/replaykit/mitmproxy}"
STAMP="$VENV/.constraints-$(sha256sum "$CONSTRAINTS" | cut -c1-16)"
if [ -f "$STAMP" ] && "$VENV/bin/mitmdump" --version >/dev/null 2>&1; then
  echo "setup-network: mitmproxy ready in $VENV"
  exit 0
fi
PY="$(command -v python3.11 || command -v python3)"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c "$CONSTRAINTS" "$MITMPROXY_REQUIREMENT" 2>&1 |
  { grep -v "is ignored: it is neither a file nor a directory" || true; }
"$VENV/bin/mitmdump" --version | sed -n 1p # sed reads it all: no broken pipe under pipefail
touch "$STAMP"
echo "setup-network: mitmproxy installed in $VENV"
