#!/usr/bin/env bash
# SWE-style verifier: the repository's own tests (as shipped) plus hidden tests must pass.
APP_DIR="${APP_DIR:-/app}"
LOGS_DIR="${LOGS_DIR:-/logs}"
TESTS_DIR="${TESTS_DIR:-/tests}"
mkdir -p "$LOGS_DIR/verifier"
cd "$APP_DIR" || { echo 0 > "$LOGS_DIR/verifier/reward.txt"; exit 0; }
work="$(mktemp -d)"
cp "$TESTS_DIR/test_hidden.py" "$work/"
cat > "$work/test_visible.py" <<'PY'
import unittest

from statkit import mean, median, mode


class CoreTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_median_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_mode(self):
        self.assertEqual(mode([1, 2, 2, 3]), 2)
PY
# the full unittest output (with its timings) goes to a log; stdout stays deterministic
if PYTHONPATH="$APP_DIR" python3 -m unittest discover -s "$work" -p 'test_*.py' > "$LOGS_DIR/verifier/unittest.log" 2>&1; then
  echo "PASS"; echo 1 > "$LOGS_DIR/verifier/reward.txt"
else
  echo "FAIL: tests fail:"; grep -E '^(FAIL|ERROR):' "$LOGS_DIR/verifier/unittest.log" | sort
  echo 0 > "$LOGS_DIR/verifier/reward.txt"
fi
rm -rf "$work"
