#!/usr/bin/env bash
# Verifier for count-error-lines: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"

fail() { echo "FAIL: $*"; return 1; }

check() {
  local f="$APP_DIR/error_count.txt"
  [ -f "$f" ] || fail "error_count.txt does not exist" || return 1
  [ "$(tr -d '[:space:]' < "$f")" = "5" ] || fail "wrong count: $(head -c 50 "$f")" || return 1
}

if check; then
  echo "PASS"
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
