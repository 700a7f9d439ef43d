#!/usr/bin/env bash
# Makes llama.cpp's own OpenAI-compatible server, `llama-server`, available to the tests marked
# `engine` and to `replaykit engine start`:
#   ~/.cache/replaykit/llama.cpp/llama-cpp-python-<version>/bin/llama-server
# built from the llama.cpp vendored in the llama-cpp-python sdist. Run by scripts/test.sh.
#
# One llama.cpp build for both engines (issue 39 item 8): scripts/build-llama-cpp.sh compiles
# llama.cpp once, llama-server beside the shared libraries (libllama, libggml*, libmtmd) that
# scripts/setup-engine.sh puts into the llama-cpp-python wheel, so whichever of the two setups
# runs first compiles (~10 CPU-minutes idle, far longer on a loaded machine, with progress) and
# the other finds the build cached, keyed by version: later runs and fresh clones take a second.
# The build is offline (no web UI download, no OpenSSL, CPU only, portable: -DGGML_NATIVE=OFF).
# Fails loudly; never skips.
set -euo pipefail

VERSION=0.3.36  # llama-cpp-python's; its vendor/llama.cpp is what is built (replaykit/models/engines.py)
BIN="${REPLAYKIT_CACHE:-$HOME/.cache/replaykit}/llama.cpp/llama-cpp-python-$VERSION/bin/llama-server"

bash "$(dirname "$0")/build-llama-cpp.sh"
"$BIN" --version 2>&1 | sed -n 1p || { echo "llama-server does not run: $BIN" >&2; exit 1; }
echo "llama-server ready: $BIN"
