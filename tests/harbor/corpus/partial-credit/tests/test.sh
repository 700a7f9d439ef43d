#!/bin/bash
mkdir -p /logs/verifier
n=0; for f in a b c d; do [ -f /app/$f ] && n=$((n + 1)); done
python3 -c "print($n / 4)" > /logs/verifier/reward.txt
