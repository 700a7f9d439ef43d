#!/usr/bin/env bash
# Installs Debian's chromium for the real-browser report test (tests/report/test_browser.py),
# unless it is already there. Run by scripts/test.sh. Playwright drives this system
# executable; `playwright install` (a browser download) is never used.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo unknown version)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
# apt's lock may be held by another installer: wait for it rather than fail
$SUDO apt-get -o DPkg::Lock::Timeout=300 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version
