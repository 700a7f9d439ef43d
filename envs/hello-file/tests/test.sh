#!/usr/bin/env bash
# Verifier for hello-file: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"

fail() { echo "FAIL: $*"; return 1; }

check() {
  local f="$APP_DIR/greeting/hello.txt"
  [ -f "$f" ] || fail "greeting/hello.txt does not exist" || return 1
  [ "$(cat "$f")" = "Hello, replaykit!" ] || fail "wrong content: $(head -c 200 "$f")" || return 1
  [ "$(wc -l < "$f")" -eq 1 ] || fail "expected exactly one line" || return 1
}

if check; then
  echo "PASS"
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
