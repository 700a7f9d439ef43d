#!/usr/bin/env bash
# Verifier for env-greeting: EXPECTED_NAME comes from [verifier.env] (only the verifier sees it).
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"
if [ -z "${EXPECTED_NAME:-}" ]; then
  echo "FAIL: EXPECTED_NAME is unset ([verifier.env] not applied)"; echo 0 > "$LOGS_DIR/verifier/reward.txt"
elif [ "$(cat "$APP_DIR/greeting.txt" 2>/dev/null)" = "Good day, $EXPECTED_NAME." ]; then
  echo "PASS"; echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo "FAIL: greeting.txt is not 'Good day, $EXPECTED_NAME.'"; echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
