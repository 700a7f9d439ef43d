#!/usr/bin/env bash
# An OCI registry for the push/pull tests (tests/exchange/test_oci.py), run by scripts/test.sh,
# idempotent (instant when installed): Debian's docker-registry (the CNCF distribution registry)
# and apache2-utils' htpasswd (bcrypt lines for its basic auth). Nothing is started here: each
# test module starts its own instance on a free loopback port with its own storage folder and
# credentials (tests/exchange/registry.py); the package's own service is not enabled.
set -euo pipefail

need=()
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
[ ${#need[@]} -eq 0 ] && { echo "setup-registry: docker-registry and htpasswd present"; exit 0; }
if [ "$(id -u)" != 0 ]; then
  echo "setup-registry: ${need[*]} missing and this is not root; apt-get install ${need[*]}" >&2
  exit 1
fi
echo "setup-registry: installing ${need[*]}"
apt-get update -qq || echo "setup-registry: apt-get update reported errors; trying the install anyway" >&2
# policy-rc.d 101: the package's registry service is not started (the tests start their own)
restore=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  restore=1
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
[ -z "$restore" ] || rm -f /usr/sbin/policy-rc.d
command -v systemctl >/dev/null 2>&1 && systemctl disable --now docker-registry >/dev/null 2>&1 || true
echo "setup-registry: ready ($(docker-registry --version 2>/dev/null | head -1))"
