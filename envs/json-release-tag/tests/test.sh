#!/usr/bin/env bash
# Verifier for json-release-tag: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"

fail() { echo "FAIL: $*"; return 1; }

check() {
  local f="$APP_DIR/release_tag.txt"
  [ -f "$f" ] || fail "release_tag.txt does not exist" || return 1
  [ "$(cat "$f")" = "ledger-api@3.4.1" ] || fail "wrong tag: $(head -c 100 "$f")" || return 1
}

if check; then
  echo "PASS"
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
