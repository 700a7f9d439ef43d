#!/usr/bin/env bash
# Step "total": extra.csv appended, total.txt = 14.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"
expected="$(printf 'item,qty\napple,3\npear,5\nkiwi,2\nplum,4')"
if [ "$(cat "$APP_DIR/inventory.csv" 2>/dev/null)" = "$expected" ] && [ "$(cat "$APP_DIR/total.txt" 2>/dev/null)" = "14" ]; then
  echo "PASS"; echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo "FAIL: inventory.csv or total.txt is wrong"; echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
