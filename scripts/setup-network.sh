#!/usr/bin/env bash
# The frozen network's proxy: mitmproxy 11.0 in its own virtualenv under
# ~/.cache/replaykit/mitmproxy (its pinned h11/cryptography would break the openai client's
# if installed beside replaykit). Idempotent: fast when mitmdump is already there.
set -euo pipefail
VENV="${REPLAYKIT_MITMPROXY_VENV:-$HOME/.cache/replaykit/mitmproxy}"
if "$VENV/bin/mitmdump" --version >/dev/null 2>&1; then
    echo "setup-network: mitmproxy ready in $VENV"
    exit 0
fi
PY="$(command -v python3.11 || command -v python3)"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check 'mitmproxy>=11.0,<11.1'
"$VENV/bin/mitmdump" --version | head -1
echo "setup-network: mitmproxy installed in $VENV"
