#!/usr/bin/env bash
# Step "record": inventory.csv holds the header and two rows.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"
if [ "$(cat "$APP_DIR/inventory.csv" 2>/dev/null)" = "$(printf 'item,qty\napple,3\npear,5')" ]; then
  echo "PASS"; echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo "FAIL: inventory.csv is not the three expected lines"; echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
