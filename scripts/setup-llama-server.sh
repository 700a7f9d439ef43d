#!/usr/bin/env bash
# Builds llama.cpp's own OpenAI-compatible server, `llama-server`, from the llama.cpp sources
# vendored in the llama-cpp-python sdist (the same llama.cpp the engine extra's wheel is built
# from), and caches the binary, keyed by that version, under
#   ~/.cache/replaykit/bin/llama-server-<version>/llama-server
# so later runs (and fresh clones) find it in a second. `replaykit engine start` runs it.
# Run by scripts/test.sh. The sdist comes from the Python package index through pip; the build
# is offline (no web UI download, no OpenSSL, CPU only, portable: -DGGML_NATIVE=OFF).
# It compiles ~200 objects: ~10 CPU-minutes idle, far longer on a loaded machine; the object
# count and an estimate from the rate so far are printed as it goes. Fails loudly; never skips.
# The whole script is one block, read before it runs: editing this file while a build runs is safe.
{
set -euo pipefail
source "$(dirname "$0")/build-progress.sh"

VERSION=0.3.36  # llama-cpp-python's; its vendor/llama.cpp is what is built
ROOT="${REPLAYKIT_CACHE:-$HOME/.cache/replaykit}"
DEST="$ROOT/bin/llama-server-$VERSION"
BIN="$DEST/llama-server"
JOBS="${REPLAYKIT_BUILD_JOBS:-$(nproc)}"

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
  echo "llama-server (llama-cpp-python $VERSION's llama.cpp) already built: $BIN"
  exit 0
fi
for tool in cmake ninja c++; do
  command -v "$tool" >/dev/null || { echo "building llama-server needs $tool: apt-get install cmake ninja-build g++" >&2; exit 1; }
done

mkdir -p "$ROOT/bin"
work="$(mktemp -d "$ROOT/bin/.build-llama-server.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "fetching the llama-cpp-python $VERSION sdist (its vendor/llama.cpp)"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
  "llama-cpp-python==$VERSION" -d "$work" 2>&1 | { grep -v "is ignored: it is neither" || true; }
tar -xzf "$work"/llama_cpp_python-"$VERSION".tar.gz -C "$work"
src="$work/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -f "$src/tools/server/CMakeLists.txt" ] || { echo "the sdist has no vendor/llama.cpp/tools/server" >&2; exit 1; }

cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT="llama-cpp-python-$VERSION" >"$work/configure.log" 2>&1 ||
  { tail -n 30 "$work/configure.log" >&2; exit 1; }

echo "building llama-server on $JOBS jobs (load $(cut -d' ' -f1 /proc/loadavg))"
start=$SECONDS
if ! cmake --build "$work/build" --target llama-server -j "$JOBS" 2>&1 | tee "$work/build.log" | build_progress llama-server; then
  tail -n 30 "$work/build.log" >&2
  exit 1
fi
mkdir -p "$DEST.tmp"
cp "$work/build/bin/llama-server" "$DEST.tmp/llama-server"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
"$BIN" --version
echo "llama-server built in $(((SECONDS - start) / 60)) min: $BIN"
exit 0
}
