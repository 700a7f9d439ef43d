#!/bin/bash
mkdir -p /logs/verifier
c=0; [ "$(cat /app/out.txt 2>/dev/null)" = ok ] && c=1
s=0.5; [ -f /app/out.txt ] || s=0
echo "{\"correctness\": $c, \"style\": $s}" > /logs/verifier/reward.json
