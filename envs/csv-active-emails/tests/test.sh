#!/usr/bin/env bash
# Verifier for csv-active-emails: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"

fail() { echo "FAIL: $*"; return 1; }

check() {
  local f="$APP_DIR/active_emails.txt"
  [ -f "$f" ] || fail "active_emails.txt does not exist" || return 1
  local expected
  expected=$(printf '%s\n' ada@example.org barbara@example.org edsger@example.org grace@example.org linus@example.org)
  [ "$(cat "$f")" = "$expected" ] || fail "active_emails.txt has the wrong addresses or order" || return 1
}

if check; then
  echo "PASS"
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
