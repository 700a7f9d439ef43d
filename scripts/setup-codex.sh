#!/usr/bin/env bash
# Installs the Codex CLI (npm package @openai/codex) for the tests marked `codex`,
# unless a `codex` is already on PATH. Run by scripts/test.sh.
set -euo pipefail

if command -v codex >/dev/null 2>&1; then
  echo "codex already installed: $(codex --version 2>/dev/null || echo unknown version)"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is missing: installing Debian's nodejs and npm"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
npm install -g @openai/codex
codex --version
