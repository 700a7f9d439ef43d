#!/usr/bin/env bash
# Verifier for write-number: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"
cd "$APP_DIR" || exit 1
if [ "$(tr -d "[:space:]" < answer.txt 2>/dev/null)" = 42 ]; then
  echo PASS
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo FAIL
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
