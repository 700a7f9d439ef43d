#!/usr/bin/env bash
set -euo pipefail
python3 "$SOLUTION_DIR/fix.py"
