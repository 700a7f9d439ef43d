#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "HELLO VOLUME" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
