#!/usr/bin/env bash
# The one llama.cpp build (not a setup step itself: scripts/setup-engine.sh and
# scripts/setup-llama-server.sh both call it, and whichever runs first compiles).
#
# Why one build: llama-cpp-python's wheel and llama.cpp's own `llama-server` are the same C++
# (the llama.cpp vendored in the llama-cpp-python sdist). Compiled apiece they cost ~15
# CPU-minutes on a fresh machine (hours on a loaded one); here llama.cpp is compiled ONCE, with
# shared libraries, into
#   ~/.cache/replaykit/llama.cpp/llama-cpp-python-<version>/bin/llama-server
#   ~/.cache/replaykit/llama.cpp/llama-cpp-python-<version>/lib/libllama.so, libggml*.so, libmtmd.so, ...
# (every file's RPATH is $ORIGIN:$ORIGIN/../lib, so the folder can move). llama-server links
# libllama/libggml/libmtmd, which are exactly the libraries llama-cpp-python loads with ctypes
# (llama_cpp/lib/libllama.so at import, libmtmd.so for multimodal chat formats): the engine
# setup builds llama-cpp-python with -DLLAMA_BUILD=OFF (no compile) and puts these libraries
# into its wheel. The sdist is kept beside the build for that.
#
# Keyed by llama-cpp-python's version; a lock makes a second caller wait for the first build
# instead of compiling again. Offline build (no web UI download, no OpenSSL, CPU only,
# portable: -DGGML_NATIVE=OFF) on REPLAYKIT_BUILD_JOBS jobs (default: every core). Progress
# (objects done, time left at the rate so far) as it goes; wall and CPU minutes at the end.
# Fails loudly; never skips.
# The whole script is one block, read before it runs: editing this file while a build runs is safe.
{
set -euo pipefail
source "$(dirname "$0")/build-progress.sh"

VERSION=0.3.36  # llama-cpp-python's; its vendor/llama.cpp is what is built
ROOT="${REPLAYKIT_CACHE:-$HOME/.cache/replaykit}/llama.cpp"
DEST="$ROOT/llama-cpp-python-$VERSION"
SDIST="$ROOT/llama_cpp_python-$VERSION.tar.gz"
JOBS="${REPLAYKIT_BUILD_JOBS:-$(nproc)}"
#: the libraries llama-cpp-python's own build installs into its wheel (its CMakeLists.txt)
WHEEL_LIBS=(llama ggml ggml-base ggml-cpu mtmd)

built() {
  [ -f "$DEST/.complete" ] && [ -f "$SDIST" ] && "$DEST/bin/llama-server" --version >/dev/null 2>&1
}

mkdir -p "$ROOT"
exec 9>"$ROOT/.lock"
if ! flock -n 9; then
  echo "another llama.cpp build is running (lock $ROOT/.lock): waiting for it"
  flock 9
fi
if built; then
  echo "llama.cpp (llama-cpp-python $VERSION's) already built: $DEST"
  exit 0
fi
for tool in cmake ninja c++ ldd; do
  command -v "$tool" >/dev/null || { echo "building llama.cpp needs $tool: apt-get install cmake ninja-build g++" >&2; exit 1; }
done

work="$(mktemp -d "$ROOT/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
if [ ! -f "$SDIST" ]; then
  echo "fetching the llama-cpp-python $VERSION sdist (its vendor/llama.cpp)"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$VERSION" -d "$work" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  mv "$work/llama_cpp_python-$VERSION.tar.gz" "$SDIST"
fi
tar -xzf "$SDIST" -C "$work"
src="$work/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -f "$src/tools/server/CMakeLists.txt" ] || { echo "the sdist has no vendor/llama.cpp/tools/server" >&2; exit 1; }

# shellcheck disable=SC2016  # $ORIGIN is for the dynamic loader, not the shell
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN:$ORIGIN/../lib' \
  -DGGML_NATIVE=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT="llama-cpp-python-$VERSION" >"$work/configure.log" 2>&1 ||
  { tail -n 30 "$work/configure.log" >&2; exit 1; }

echo "compiling llama.cpp (llama-server and the shared libraries llama-cpp-python loads) on $JOBS jobs" \
  "(~10 CPU-minutes idle; load $(cut -d' ' -f1 /proc/loadavg))"
start=$SECONDS
targets=(llama-server "${WHEEL_LIBS[@]}")
if ! /usr/bin/env time -f "%U %S" -o "$work/cpu" cmake --build "$work/build" --target "${targets[@]}" -j "$JOBS" 2>&1 |
  tee "$work/build.log" | build_progress llama.cpp; then
  tail -n 30 "$work/build.log" >&2
  exit 1
fi
grep -q "^[0-9.]* [0-9.]*$" "$work/cpu" || { tail -n 30 "$work/build.log" >&2; exit 1; }

out="$work/out"
mkdir -p "$out/bin" "$out/lib"
cp "$work/build/bin/llama-server" "$out/bin/"
cp -a "$work/build/bin/"lib*.so* "$out/lib/"
for lib in "${WHEEL_LIBS[@]}"; do
  [ -e "$out/lib/lib$lib.so" ] || { echo "the build made no lib$lib.so" >&2; exit 1; }
done
if ldd "$out/bin/llama-server" "$out/lib/"lib*.so | grep "not found" >/dev/null; then
  ldd "$out/bin/llama-server" "$out/lib/"lib*.so >&2
  echo "llama.cpp's build needs a library that is not in $out/lib" >&2
  exit 1
fi
"$out/bin/llama-server" --version
touch "$out/.complete"
rm -rf "$DEST" && mv "$out" "$DEST"
read -r user sys <"$work/cpu"
echo "llama.cpp compiled in $(((SECONDS - start) / 60)) min wall," \
  "$(python3 -c "print(round(($user + $sys) / 60, 1))") CPU-minutes: $DEST"
exit 0
}
