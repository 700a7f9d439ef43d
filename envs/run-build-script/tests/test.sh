#!/usr/bin/env bash
# Verifier for run-build-script: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"

fail() { echo "FAIL: $*"; return 1; }

check() {
  [ -x "$APP_DIR/build.sh" ] || fail "build.sh is not executable" || return 1
  local f="$APP_DIR/dist/manifest.txt"
  [ -f "$f" ] || fail "dist/manifest.txt does not exist" || return 1
  local expected
  expected=$(printf '%s\n' "build ok: 3 modules" "- auth: v1.2 authentication" "- billing: v0.9 invoices and payments" "- search: v2.0 full-text search")
  [ "$(cat "$f")" = "$expected" ] || fail "dist/manifest.txt has the wrong content" || return 1
}

if check; then
  echo "PASS"
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
