#!/usr/bin/env bash
# Verifier for fix-config-port: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"

fail() { echo "FAIL: $*"; return 1; }

check() {
  local f="$APP_DIR/config/app.conf"
  [ -f "$f" ] || fail "config/app.conf is missing" || return 1
  local expected
  expected=$(cat <<'CONF'
# service configuration
name = inventory
host = 127.0.0.1
port = 9090
debug = false
workers = 4
# end
CONF
)
  [ "$(cat "$f")" = "$expected" ] || fail "config/app.conf does not match the expected configuration" || return 1
}

if check; then
  echo "PASS"
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
