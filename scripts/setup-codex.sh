#!/usr/bin/env bash
# Installs the Codex CLI (npm package @openai/codex, the pinned CODEX_VERSION) for the tests
# marked `codex`, unless that version is already on PATH. Run by scripts/test.sh;
# scripts/lock.sh prints the newest version to compare with the pin.
set -euo pipefail
CODEX_VERSION="0.171.0"

if command -v codex >/dev/null 2>&1 && [ "$(codex --version 2>/dev/null)" = "codex-cli $CODEX_VERSION" ]; then
  echo "codex $CODEX_VERSION already installed"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is missing: installing Debian's nodejs and npm"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
npm install -g "@openai/codex@$CODEX_VERSION"
codex --version
