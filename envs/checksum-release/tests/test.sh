#!/usr/bin/env bash
# Verifier for checksum-release: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"

fail() { echo "FAIL: $*"; return 1; }

check() {
  local f="$APP_DIR/release/SHA256SUMS"
  [ -f "$f" ] || fail "release/SHA256SUMS does not exist" || return 1
  [ "$(cat "$f")" = "deb1b1bcfa841a506883a66e8d74d651c9144354c7faef027b7a433bc96236e3  payload.txt" ] || fail "release/SHA256SUMS has the wrong content" || return 1
}

if check; then
  echo "PASS"
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
