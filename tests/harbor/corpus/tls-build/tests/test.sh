#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/version.txt 2>/dev/null)" = 1.16.0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
