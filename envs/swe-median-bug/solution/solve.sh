#!/usr/bin/env bash
set -euo pipefail
# Harbor sets no SOLUTION_DIR: fall back to where both put solution/
python3 "${SOLUTION_DIR:-/solution}/fix.py"
