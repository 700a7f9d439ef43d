#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/pong.txt 2>/dev/null)" = pong ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
