#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/greeting.txt 2>/dev/null)" = "$EXPECTED" ] && [ "$GREETING" = hello ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
