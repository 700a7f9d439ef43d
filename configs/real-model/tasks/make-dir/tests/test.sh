#!/usr/bin/env bash
# Verifier for make-dir: writes 1 (pass) or 0 (fail) to $LOGS_DIR/verifier/reward.txt.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
mkdir -p "$LOGS_DIR/verifier"
cd "$APP_DIR" || exit 1
if [ -d build ]; then
  echo PASS
  echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo FAIL
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
