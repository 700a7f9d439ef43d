#!/usr/bin/env bash
# Builds the release manifest from the modules in src/.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$here/dist"
count=$(ls "$here/src" | grep -c '\.mod$')
{
  echo "build ok: $count modules"
  for m in $(ls "$here/src" | grep '\.mod$' | sort); do
    echo "- ${m%.mod}: $(head -n 1 "$here/src/$m")"
  done
} > "$here/dist/manifest.txt"
echo "wrote dist/manifest.txt"
