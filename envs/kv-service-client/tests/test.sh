#!/usr/bin/env bash
# Verifier for kv-service-client: release.txt holds the service's value of key `release`.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"
if [ "$(cat "$APP_DIR/release.txt" 2>/dev/null)" = "aurora-7" ]; then
  echo "PASS"; echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo "FAIL: release.txt is not the value of key release"; echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
