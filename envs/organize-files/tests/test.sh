#!/usr/bin/env bash
# Verifier for organize-files: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"

fail() { echo "FAIL: $*"; return 1; }

check() {
  [ "$(ls -A "$APP_DIR/inbox" 2>/dev/null | tr '\n' ' ')" = "README.md " ] || fail "inbox/ must hold only README.md" || return 1
  [ "$(ls -A "$APP_DIR/notes" 2>/dev/null | tr '\n' ' ')" = "meeting.txt todo.txt " ] || fail "notes/ must hold meeting.txt and todo.txt" || return 1
  [ "$(ls -A "$APP_DIR/data" 2>/dev/null | tr '\n' ' ')" = "sales.csv users.csv " ] || fail "data/ must hold sales.csv and users.csv" || return 1
  [ "$(cat "$APP_DIR/notes/meeting.txt")" = "Meeting notes: ship v2 on Friday." ] || fail "notes/meeting.txt content changed" || return 1
  [ "$(sed -n 3p "$APP_DIR/data/sales.csv")" = "south,80" ] || fail "data/sales.csv content changed" || return 1
}

if check; then
  echo "PASS"
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
