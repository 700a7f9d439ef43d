#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/got.txt 2>/dev/null)" = "served by the container itself" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
