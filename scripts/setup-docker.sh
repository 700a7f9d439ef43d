#!/usr/bin/env bash
# Docker for the Docker tests, on a fresh machine (run by scripts/test.sh, as root):
#  1. when no Docker engine answers: install docker.io (and debootstrap) from the
#     Debian archive if missing, start dockerd in the background (log under /tmp),
#     and wait until it answers (bounded);
#  2. build the local base image replaykit/base:bookworm and its python flavour
#     replaykit/base:bookworm-python (pip, venv, uv, pytest; wheels downloaded on the host)
#     (cached: each skipped when present).
# Nothing is pulled from an image registry.
set -euo pipefail
cd "$(dirname "$0")/.."

DOCKERD_LOG=/tmp/replaykit-dockerd.log
WAIT_SEC=${REPLAYKIT_DOCKERD_WAIT_SEC:-90}

need=()
command -v docker >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)

if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null 2>&1 || [ -x /usr/sbin/dockerd ] || need+=(docker.io)
fi

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup-docker: missing ${need[*]} and not root; install them or run as root" >&2
    exit 1
  fi
  echo "setup-docker: installing ${need[*]}"
  apt-get update -qq || echo "setup-docker: apt-get update reported errors; trying the install anyway" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "setup-docker: starting dockerd (log: $DOCKERD_LOG)"
    # its own session: the daemon outlives the shell (and the process group) that started it
    PATH="/usr/sbin:/sbin:$PATH" setsid nohup dockerd >"$DOCKERD_LOG" 2>&1 </dev/null &
  fi
  for _ in $(seq 1 "$WAIT_SEC"); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    echo "setup-docker: dockerd did not answer within ${WAIT_SEC}s; last log lines:" >&2
    tail -n 20 "$DOCKERD_LOG" >&2 || true
    exit 1
  fi
fi
echo "setup-docker: engine $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?') is up"

PATH="/usr/sbin:/sbin:$PATH" python3 -m replaykit.cli images build-base
PATH="/usr/sbin:/sbin:$PATH" python3 -m replaykit.cli images build-base --flavor python
